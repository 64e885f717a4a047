// One writer per inference server: two runs pushing weights into one server would each
// roll out on the other's weights (their reloads interleave) without either noticing.
// A run takes a lock file per server it syncs, in a directory every run on the machine
// shares, holding its process id and run directory; a second run finds it and is
// refused at the start, naming the run that holds the server. A lock whose process is
// gone (a run that crashed) is taken over.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';
import { sha256Hex } from '../util/sha256.ts';

/** Where the locks live: WGT_SERVER_LOCKS, else a folder under the system's temporary directory. */
export function lockDirectory(): string {
  return hostProcess().env.WGT_SERVER_LOCKS ?? path.join(hostProcess().tempDir, 'webgpu-agent-trainer-server-locks');
}

interface LockRecord {
  url: string;
  pid: number;
  host: string;
  runDir: string;
  since: string;
}

export class ServerInUseError extends Error {
  override name = 'ServerInUseError';
}

function readRecord(file: string): LockRecord | null {
  try {
    return JSON.parse(storage().readText(file)) as LockRecord;
  } catch {
    return null;
  }
}

/** The lock of one server for one run; release() gives it back. */
export class WriterLock {
  private constructor(
    readonly url: string,
    private readonly file: string,
  ) {}

  /** Takes the lock of `url` for the run in `runDir`; throws ServerInUseError when a live run holds it. */
  static acquire(url: string, runDir: string, dir = lockDirectory()): WriterLock {
    storage().makeDir(dir);
    const file = path.join(dir, `${sha256Hex(url).slice(0, 20)}.json`);
    const host = hostProcess();
    const mine: LockRecord = { url, pid: host.pid, host: host.hostname, runDir: path.resolve(runDir), since: new Date().toISOString() };
    for (let tries = 0; tries < 3; tries++) {
      if (storage().createExclusive(file, JSON.stringify(mine))) return new WriterLock(url, file);
      const held = readRecord(file);
      if (held && held.host === mine.host && held.pid !== host.pid && host.alive(held.pid)) {
        throw new ServerInUseError(
          `${url}: another run pushes its weights into this server (process ${held.pid}, ${held.runDir}, since ${held.since}); ` +
          'two writers would each roll out on the other\'s weights. Give this run a server of its own (compare: a list in rollout.url, one per parallel run), or wait for that run to end.',
        );
      }
      if (held && held.host !== mine.host) {
        throw new ServerInUseError(`${url}: a run on ${held.host} (process ${held.pid}, ${held.runDir}) holds this server's lock ${file}; if that run has ended, remove the file`);
      }
      if (held && held.pid === host.pid && held.runDir !== mine.runDir) {
        throw new ServerInUseError(`${url}: the run in ${held.runDir} in this process already pushes its weights into this server`);
      }
      // Stale (its process is gone), unreadable, or our own: take it over.
      storage().remove(file);
    }
    throw new ServerInUseError(`${url}: could not take the server's lock ${file}`);
  }

  release(): void {
    const held = readRecord(this.file);
    if (held && held.pid === hostProcess().pid) storage().remove(this.file);
  }
}
