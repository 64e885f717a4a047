// One writer per run directory. A training run holds <run>/run.lock, a JSON record of
// its process (pid, host, start, command line), for as long as it writes there; a
// second writer is refused with a message naming the first. A lock whose process is
// gone from this host (killed, crashed) is stale and taken over, saying so; one from
// another host (a shared filesystem) cannot be checked and is left for the user.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';

export const RUN_LOCK_FILE = 'run.lock';

export interface LockOwner {
  pid: number;
  host: string;
  /** ISO time the lock was taken. */
  started: string;
  command: string;
}

/** A second writer: the message names the first and what to do. */
export class RunLockedError extends Error {
  override name = 'RunLockedError';
}

function readOwner(file: string): LockOwner | null {
  try {
    const v = JSON.parse(storage().readText(file)) as Partial<LockOwner>;
    return Number.isInteger(v.pid) && typeof v.host === 'string' ? { pid: v.pid!, host: v.host, started: String(v.started ?? '?'), command: String(v.command ?? '?') } : null;
  } catch {
    return null;
  }
}

/** Why the lock at `file` is stale, or null when its owner may still be writing. */
function staleness(owner: LockOwner | null, file: string): string | null {
  if (!owner) {
    // A lock being written right now is empty for a moment; one that stays unreadable is left over.
    const age = Date.now() - (storage().stat(file)?.mtimeMs ?? 0);
    return age > 10_000 ? `${file} is not a lock record` : null;
  }
  const host = hostProcess();
  if (owner.host !== host.hostname) return null;
  if (owner.pid === host.pid) {
    // The pid of a process that ended before this one started (a container's pids repeat).
    return Date.parse(owner.started) < host.startedAt ? `its process ${owner.pid} ended before this one started` : null;
  }
  return host.alive(owner.pid) ? null : `its process ${owner.pid} is gone`;
}

function lockedMessage(dir: string, file: string, owner: LockOwner | null): string {
  if (!owner) return `${dir} is being written by another process (${file} is being created); try again in a moment`;
  const self = owner.pid === hostProcess().pid && owner.host === hostProcess().hostname;
  const who = self ? 'this process (another run of the same name)' : `pid ${owner.pid} on ${owner.host}`;
  return `${dir} is in use by ${who} since ${owner.started} (${owner.command}): one run writes a run directory at a time; wait for it to end, `
    + `or set output.runName to another name (delete ${file} only if no run is writing there)`;
}

/** Refuses now, before any work, when another live process holds the run directory's lock. */
export function assertRunUnlocked(dir: string): void {
  const file = path.join(dir, RUN_LOCK_FILE);
  if (!storage().exists(file)) return;
  const owner = readOwner(file);
  if (staleness(owner, file) === null) throw new RunLockedError(lockedMessage(dir, file, owner));
}

export class RunLock {
  private held = true;
  private readonly offExit: () => void;

  private constructor(readonly file: string, private readonly owner: LockOwner) {
    // process.exit() (a second Ctrl-C) skips every finally block; the lock still goes.
    this.offExit = hostProcess().onExit(() => this.release());
  }

  /** Takes the lock of `dir` (created if missing); `log` hears about a stale lock taken over. */
  static acquire(dir: string, log: (line: string) => void = () => {}): RunLock {
    storage().makeDir(dir);
    const file = path.join(dir, RUN_LOCK_FILE);
    const host = hostProcess();
    const owner: LockOwner = { pid: host.pid, host: host.hostname, started: new Date().toISOString(), command: host.command };
    for (let attempt = 0; attempt < 3; attempt++) {
      if (storage().createExclusive(file, JSON.stringify(owner, null, 2) + '\n')) return new RunLock(file, owner);
      const held = readOwner(file);
      const stale = staleness(held, file);
      if (stale === null) throw new RunLockedError(lockedMessage(dir, file, held));
      log(`${dir}: taking over a stale lock (${stale}${held ? `; it was taken ${held.started} by ${held.command}` : ''})`);
      storage().remove(file);
    }
    throw new RunLockedError(`${dir}: could not take ${file}: other processes keep taking it`);
  }

  /** Gives the lock up (once); a lock that another process has since taken over stays theirs. */
  release(): void {
    if (!this.held) return;
    this.held = false;
    this.offExit();
    const now = readOwner(this.file);
    if (now && now.pid === this.owner.pid && now.host === this.owner.host && now.started === this.owner.started) storage().remove(this.file);
  }
}
