// Several environment servers as one environment: a thin layer over the clients of
// one server each (our protocol's or AgentGym's, with its reused environments per
// worker). A session is created on the server with the fewest live sessions and stays
// there; a server that stops answering is set aside for a while, and the sessions it
// held end in SessionLostError, so their episodes start over on another server (the
// agent loop restarts an episode whose session was lost).

import { RemoteEnvError, SessionLostError } from './client.ts';
import type { CreateOptions, EnvSession, Environment, ResetResult, StepResult, TaskSplit } from './types.ts';

/** How long a server that stopped answering is passed over before it is tried again. */
const SET_ASIDE_MS = 30_000;

/** The server is gone (no connection, no answer), as opposed to an answer the episode must take. */
function serverGone(e: unknown): boolean {
  return e instanceof RemoteEnvError && !(e instanceof SessionLostError) && e.status === null;
}

interface Member {
  url: string;
  env: Environment;
  live: number;
  asideUntil: number;
}

export class EnvironmentPool implements Environment {
  readonly name: string;
  readonly version: string;
  readonly maxSteps: number;
  private readonly members: Member[];

  constructor(servers: readonly { url: string; env: Environment }[], private readonly log: (line: string) => void = () => {}) {
    if (!servers.length) throw new Error('env.url: no server given');
    this.members = servers.map((s) => ({ url: s.url, env: s.env, live: 0, asideUntil: 0 }));
    const first = servers[0].env;
    this.name = first.name;
    this.version = first.version;
    this.maxSteps = first.maxSteps;
  }

  /** Every server answers and serves this kind of environment. */
  async check(): Promise<void> {
    await Promise.all(this.members.map((m) => m.env.check?.()));
  }

  taskCount(split: TaskSplit): Promise<number | null> {
    return this.members[0].env.taskCount?.(split) ?? Promise.resolve(null);
  }

  /** The servers by preference: those not set aside first, then the fewest live sessions. */
  private order(): Member[] {
    const now = Date.now();
    return [...this.members].sort((a, b) => Number(a.asideUntil > now) - Number(b.asideUntil > now) || a.live - b.live);
  }

  setAside(m: Member, e: unknown): void {
    const first = m.asideUntil <= Date.now();
    m.asideUntil = Date.now() + SET_ASIDE_MS;
    if (first) this.log(`environment server ${m.url} stopped answering (${(e as Error).message}); its episodes start over on the others`);
  }

  async create(opts: CreateOptions): Promise<EnvSession> {
    let last: unknown = null;
    for (const m of this.order()) {
      // Counted before the server answers, so the sessions created at once spread.
      m.live++;
      try {
        return new PooledSession(this, m, await m.env.create(opts));
      } catch (e) {
        m.live--;
        if (!serverGone(e)) throw e;
        this.setAside(m, e);
        last = e;
      }
    }
    throw new RemoteEnvError(`no environment server answers (${this.members.map((m) => m.url).join(', ')}): ${(last as Error)?.message}`);
  }
}

class PooledSession implements EnvSession {
  private open = true;

  constructor(
    private readonly pool: EnvironmentPool,
    private readonly member: Member,
    private readonly inner: EnvSession,
  ) {}

  get task(): string {
    return this.inner.task;
  }

  get server(): string {
    return this.member.url;
  }

  private async guard<T>(what: string, fn: () => Promise<T> | T): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (!serverGone(e)) throw e;
      this.pool.setAside(this.member, e);
      throw new SessionLostError(`environment server ${this.member.url} stopped answering during ${what}: ${(e as Error).message}`);
    }
  }

  reset(): Promise<ResetResult> {
    return this.guard('reset', () => this.inner.reset());
  }

  step(action: string): Promise<StepResult> {
    return this.guard('step', () => this.inner.step(action));
  }

  async close(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    this.member.live--;
    await this.inner.close();
  }
}
