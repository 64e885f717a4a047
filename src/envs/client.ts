// An Environment whose sessions live on a server speaking our protocol (docs/PROTOCOLS.md
// section 4), so the agent loop drives remote and in-process environments alike.

import { fetchJson, isObject, isStringArray, RemoteEnvError, SessionLostError, type JsonRequest } from './http_json.ts';
import type { CreateOptions, EnvInfo, EnvSession, Environment, ResetResult, StepResult } from './types.ts';

export { RemoteEnvError, SessionLostError };

export interface RemoteEnvironmentOptions {
  /** Per-request deadline. */
  timeoutMs?: number;
  /** The names /health may report for check() to pass (a kind's name and aliases); default the environment's name. */
  accepts?: readonly string[];
}

export interface RemoteMeta {
  name: string;
  version: string;
  maxSteps: number;
}

const DEFAULT_TIMEOUT_MS = 60_000;

function checkInfo(v: unknown, what: string): EnvInfo {
  if (!isObject(v) || typeof v.won !== 'boolean' || typeof v.task_type !== 'string') {
    throw new RemoteEnvError(`${what}: malformed answer: "info" must hold boolean "won" and string "task_type"`);
  }
  return v as EnvInfo;
}

function checkReset(v: unknown, what: string): ResetResult & { id: string; task?: string } {
  if (!isObject(v) || typeof v.id !== 'string' || typeof v.observation !== 'string' || !isStringArray(v.admissible_actions)) {
    throw new RemoteEnvError(`${what}: malformed answer: expected {id, observation, admissible_actions, info}`);
  }
  return {
    id: v.id,
    task: typeof v.task === 'string' ? v.task : undefined,
    observation: v.observation,
    admissible_actions: v.admissible_actions,
    info: checkInfo(v.info, what),
  };
}

function checkStep(v: unknown, what: string): StepResult {
  if (
    !isObject(v) || typeof v.observation !== 'string' || typeof v.reward !== 'number' || typeof v.done !== 'boolean' ||
    !isStringArray(v.admissible_actions)
  ) {
    throw new RemoteEnvError(`${what}: malformed answer: expected {observation, reward, done, admissible_actions, info}`);
  }
  return { observation: v.observation, reward: v.reward, done: v.done, admissible_actions: v.admissible_actions, info: checkInfo(v.info, what) };
}

/** GET /health of a server of our protocol: {ok: true, env, ...}, or a RemoteEnvError saying what answered instead. */
async function health(base: string, timeoutMs: number): Promise<Record<string, unknown> & { env: string }> {
  const label = `environment server ${base}`;
  let answer;
  try {
    answer = await fetchJson({ label, baseUrl: base, method: 'GET', path: '/health', timeoutMs });
  } catch (e) {
    throw new RemoteEnvError(`${(e as Error).message}; is the server running? (env.url names it; \`env serve <name>\` starts one of ours)`, (e as RemoteEnvError).status);
  }
  const { status, body } = answer;
  if (status !== 200 || !isObject(body) || body.ok !== true || typeof body.env !== 'string') {
    throw new RemoteEnvError(
      `${label}: GET /health -> ${status}: not a healthy environment server of this project's protocol (${JSON.stringify(body)?.slice(0, 200)}); ` +
        'an AgentGym server wants env.agentgym=true',
      status,
    );
  }
  return body as Record<string, unknown> & { env: string };
}

/** The task sentence when the server does not send one: ALFWorld-style observations carry it. */
function taskFromObservation(observation: string): string {
  return observation.match(/Your task is to: (.*)/)?.[1]?.trim() ?? '';
}

export class RemoteEnvironment implements Environment {
  readonly name: string;
  readonly version: string;
  readonly maxSteps: number;
  readonly url: string;
  private readonly timeoutMs: number;
  private readonly accepts: readonly string[] | undefined;

  constructor(url: string, meta: RemoteMeta, options: RemoteEnvironmentOptions = {}) {
    this.url = url.replace(/\/+$/, '');
    this.name = meta.name;
    this.version = meta.version;
    this.maxSteps = meta.maxSteps;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.accepts = options.accepts;
  }

  /** Reads name, version and step cap from GET /health. */
  static async connect(url: string, options: RemoteEnvironmentOptions & { maxSteps?: number } = {}): Promise<RemoteEnvironment> {
    const base = url.replace(/\/+$/, '');
    const label = `environment server ${base}`;
    const body = await health(base, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const maxSteps = typeof body.max_steps === 'number' ? body.max_steps : options.maxSteps;
    if (maxSteps === undefined) throw new RemoteEnvError(`${label}: /health has no "max_steps"; pass maxSteps`);
    return new RemoteEnvironment(base, { name: body.env, version: String(body.version ?? ''), maxSteps }, options);
  }

  get label(): string {
    return `${this.name} server ${this.url}`;
  }

  /** /health answers and names an environment of this kind. */
  async check(): Promise<void> {
    const body = await health(this.url, this.timeoutMs);
    const accepts = this.accepts ?? [this.name];
    if (!accepts.includes(body.env)) {
      throw new RemoteEnvError(
        `environment server ${this.url} serves the ${body.env} environment, but the config's env is ${this.name}: ` +
          `point env.url at a ${this.name} server, or set env.name to the server's`,
        200,
      );
    }
  }

  /** One request to this server; non-2xx answers become RemoteEnvError with the server's message. */
  async call(method: JsonRequest['method'], path: string, body?: unknown): Promise<unknown> {
    const answer = await fetchJson({ label: this.label, baseUrl: this.url, method, path, body, timeoutMs: this.timeoutMs });
    if (answer.status < 200 || answer.status >= 300) {
      const message = isObject(answer.body) && typeof answer.body.error === 'string' ? answer.body.error : JSON.stringify(answer.body);
      throw new RemoteEnvError(`${this.label}: ${method} ${path} -> ${answer.status}: ${message}`, answer.status);
    }
    return answer.body;
  }

  async create(opts: CreateOptions): Promise<RemoteSession> {
    const session = new RemoteSession(this, opts);
    await session.open();
    return session;
  }
}

export class RemoteSession implements EnvSession {
  task = '';
  private id: string | null = null;
  /** The answer to POST /envs, handed out by the first reset(). */
  private pending: ResetResult | null = null;

  constructor(
    private readonly env: RemoteEnvironment,
    private readonly opts: CreateOptions,
  ) {}

  /** The server's session id (changes when reset() starts a new episode). */
  get sessionId(): string | null {
    return this.id;
  }

  async open(): Promise<void> {
    const body = { task: this.opts.task ?? null, split: this.opts.split, seed: this.opts.seed };
    const first = checkReset(await this.env.call('POST', '/envs', body), `${this.env.label}: POST /envs`);
    this.id = first.id;
    this.task = first.task ?? taskFromObservation(first.observation);
    this.pending = { observation: first.observation, admissible_actions: first.admissible_actions, info: first.info };
  }

  /** The first reset returns the episode the server already started; later ones start a fresh one. */
  async reset(): Promise<ResetResult> {
    if (this.pending === null) {
      await this.close();
      await this.open();
    }
    const first = this.pending!;
    this.pending = null;
    return first;
  }

  async step(action: string): Promise<StepResult> {
    if (this.id === null) throw new RemoteEnvError(`${this.env.label}: step on a closed session`);
    this.pending = null;
    const path = `/envs/${encodeURIComponent(this.id)}/step`;
    let answer: unknown;
    try {
      answer = await this.env.call('POST', path, { action });
    } catch (e) {
      // The server restarted or reclaimed the session: the episode in it is gone.
      if (e instanceof RemoteEnvError && e.status === 404) throw new SessionLostError(e.message, 404);
      throw e;
    }
    return checkStep(answer, `${this.env.label}: POST ${path}`);
  }

  /** Deletes the server session; one the server already reclaimed counts as closed. */
  async close(): Promise<void> {
    if (this.id === null) return;
    const id = this.id;
    this.id = null;
    try {
      await this.env.call('DELETE', `/envs/${encodeURIComponent(id)}`);
    } catch (e) {
      if (!(e instanceof RemoteEnvError && e.status === 404)) throw e;
    }
  }
}
