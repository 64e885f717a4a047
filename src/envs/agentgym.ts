// An Environment backed by an AgentGym server (agentenv-alfworld, agentenv-webshop):
// POST /create, POST /reset, POST /step keyed by "id" (ALFWorld) or "env_idx"
// (WebShop), failures inside the environment answered as HTTP 200 with {"error": ...}
// (docs/AGENTGYM.md). Their rewards come on their own scales (ALFWorld 0/1, WebShop
// the purchase score); the adapter reports the outcome on the trainer's convention
// instead, the environment's success return for a won episode and 0 otherwise, so
// returns and the invalid-action penalty mean the same as with the built-in
// environment. A server's own score stays in info.score.
//
// Sessions. AgentGym's servers have no route that releases an environment: each holds a
// TextWorld game or a WebShop browser until the server stops. So, as AgentGym's own
// client does, an environment is created once and reset for every task: a session
// takes an idle one from the adapter's pool (or creates one) and hands it back when
// its episode ends, and the server never holds more environments than the episodes
// live at once. An environment the server no longer knows (it restarted) is dropped
// with every other one made before the restart; the episode that met it gets a
// SessionLostError (a reset is retried once in a new environment by the adapter itself).

import { fetchJson, isObject, isStringArray, RemoteEnvError, SessionLostError } from './http_json.ts';
import type { CreateOptions, EnvInfo, EnvSession, Environment, ResetResult, StepResult } from './types.ts';

/** How the server numbers its tasks, and the run's default task sets in that numbering (inclusive ranges "A-B"). */
export interface AgentGymTaskLayout {
  /** Tasks the server holds, indexed 0 to count - 1. */
  count: number;
  /** What the server's tasks are, for messages: "games", "goals". */
  noun: string;
  train: string;
  validation: string;
  test: string;
}

export interface AgentGymOptions {
  /** The environment's name at AgentGym ("alfworld"): labels and the default task type. */
  name: string;
  /** The server's package, for messages: "agentenv-alfworld". */
  server: string;
  version?: string;
  maxSteps: number;
  /** Request field carrying the environment: "id" (ALFWorld) or "env_idx" (WebShop). */
  idField: 'id' | 'env_idx';
  /** The /reset fields choosing task `index` besides the id. */
  resetFields: (index: number) => Record<string, unknown>;
  tasks: AgentGymTaskLayout;
  /** The server's liveness route and its answer (ALFWorld's GET / says which environment it is). */
  liveness: { path: string; answer: string };
  /** The server's message for an id it does not hold (ALFWorld: "The id 3 is not valid."). */
  unknownId?: RegExp;
  /** A route listing the ids the server holds (WebShop's /list_envs): asked when a call fails with a 5xx, which is how WebShop answers an id it does not hold. */
  listPath?: string;
  /** The admissible actions from the server's available actions (default: a list of strings, as ALFWorld sends); throws on a shape it does not know. */
  actions?: (available: unknown) => string[];
  /** Whether the episode was won; default: the answer's "won" if present, else done with reward >= 1. */
  isWon?: (reward: number, done: boolean, answer: Record<string, unknown>) => boolean;
  /** The task sentence from the first observation. */
  taskText?: (observation: string) => string;
  /** The task type from the server's label (ALFWorld's is the game's folder). */
  taskType?: (label: string) => string;
  /** The action as the server words it, given what it admits (a policy trained on another grammar). */
  translateAction?: (action: string, admissible: readonly string[]) => string;
  /** The server's reward is a native score worth reporting (WebShop's purchase score). */
  nativeScore?: boolean;
  timeoutMs?: number;
}

function stringList(v: unknown): string[] {
  if (!isStringArray(v)) throw new Error('expected a list of strings');
  return v;
}

/** One environment on the server, and the server's lifetime it belongs to. */
interface Slot {
  id: number | string;
  generation: number;
}

export class AgentGymEnvironment implements Environment {
  readonly name: string;
  readonly version: string;
  readonly maxSteps: number;
  readonly url: string;
  readonly options: AgentGymOptions;
  private idle: Slot[] = [];
  /** Bumped when the server turns out to have lost an environment: every slot made before is gone. */
  private generation = 0;
  private inUse = 0;

  /** `successReturn`: the return of a won episode on the trainer's convention (the environment plugin's). */
  constructor(url: string, options: AgentGymOptions, readonly successReturn: number) {
    if (!(successReturn > 0)) throw new RangeError(`AgentGymEnvironment: successReturn must be positive, got ${successReturn}`);
    this.url = url.replace(/\/+$/, '');
    this.options = options;
    this.name = options.name;
    this.version = options.version ?? 'agentgym';
    this.maxSteps = options.maxSteps;
  }

  get label(): string {
    return `AgentGym ${this.name} server ${this.url}`;
  }

  /** Server environments the adapter holds: in an episode or idle in the pool. */
  get held(): number {
    return this.inUse + this.idle.length;
  }

  /** One request; non-2xx answers and 200 + {"error"} both become RemoteEnvError naming the request. */
  async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    const answer = await fetchJson({ label: this.label, baseUrl: this.url, method, path, body, timeoutMs: this.options.timeoutMs ?? 60_000 });
    const error = isObject(answer.body) && 'error' in answer.body ? answer.body.error : undefined;
    if (answer.status < 200 || answer.status >= 300 || error !== undefined) {
      const detail = typeof error === 'string' ? error : isObject(answer.body) && answer.body.detail !== undefined ? JSON.stringify(answer.body.detail) : JSON.stringify(answer.body);
      throw new RemoteEnvError(`${this.label}: ${method} ${path} -> ${answer.status}: ${detail}`, answer.status);
    }
    return answer.body;
  }

  /** The liveness route answers as this kind of AgentGym server does. */
  async check(): Promise<void> {
    const { path, answer: expected } = this.options.liveness;
    let body: unknown;
    try {
      body = await this.call('GET', path);
    } catch (e) {
      throw new RemoteEnvError(`${(e as Error).message}; env.url should name a running ${this.options.server} server (docs/AGENTGYM.md)`, (e as RemoteEnvError).status);
    }
    if (body !== expected) {
      throw new RemoteEnvError(
        `${this.label}: GET ${path} answers ${JSON.stringify(body)?.slice(0, 200)}, where ${this.options.server} answers ${JSON.stringify(expected)}: ` +
          `env.url does not name AgentGym's ${this.name} server, which the config's env.name plays on`,
      );
    }
  }

  async create(opts: CreateOptions): Promise<AgentGymSession> {
    const slot = this.idle.pop() ?? (await this.newSlot());
    this.inUse++;
    return new AgentGymSession(this, slot, opts.seed);
  }

  /** A new environment on the server (not yet counted as in use). */
  async newSlot(): Promise<Slot> {
    const answer = await this.call('POST', '/create');
    const id = isObject(answer) ? answer.id : answer;
    if (typeof id !== 'number' && typeof id !== 'string') throw new RemoteEnvError(`${this.label}: POST /create: malformed answer ${JSON.stringify(answer)?.slice(0, 200)}`);
    return { id, generation: this.generation };
  }

  /** A session is done with its environment; a clean one goes back to the pool for the next episode. */
  release(slot: Slot, reusable: boolean): void {
    this.inUse--;
    if (reusable && slot.generation === this.generation) this.idle.push(slot);
  }

  /** A request in an environment; one the server turns out not to hold throws SessionLostError. */
  async sessionCall(slot: Slot, method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    if (slot.generation !== this.generation) throw new SessionLostError(`${this.label}: environment ${slot.id} went with a restart of the server`);
    try {
      return await this.call(method, path, body);
    } catch (e) {
      if (!(e instanceof RemoteEnvError) || !(await this.lost(slot, e))) throw e;
      if (slot.generation === this.generation) {
        this.generation++;
        this.idle = [];
      }
      throw new SessionLostError(`${e.message} (the server no longer holds environment ${slot.id}: it restarted)`, e.status);
    }
  }

  private async lost(slot: Slot, e: RemoteEnvError): Promise<boolean> {
    if (this.options.unknownId?.test(e.message)) return true;
    if (this.options.listPath === undefined || e.status === null || e.status < 500) return false;
    try {
      const ids = await this.call('GET', this.options.listPath);
      return Array.isArray(ids) && !ids.includes(slot.id);
    } catch {
      return false;
    }
  }
}

export class AgentGymSession implements EnvSession {
  task = '';
  private taskType: string;
  private admissible: string[] = [];
  /** False while a call is under way, and after one that got no answer or a 5xx: the environment's state is unknown, so it is not reused. */
  private clean = true;
  private closed = false;

  constructor(
    private readonly env: AgentGymEnvironment,
    private slot: Slot,
    /** The server's task index. */
    readonly index: number,
  ) {
    this.taskType = env.name;
  }

  private async request(method: 'GET' | 'POST', path: string, body?: Record<string, unknown>): Promise<unknown> {
    const field = this.env.options.idField;
    const route = method === 'GET' ? `${path}?${field}=${encodeURIComponent(String(this.slot.id))}` : path;
    this.clean = false;
    try {
      const answer = await this.env.sessionCall(this.slot, method, route, method === 'POST' ? { [field]: this.slot.id, ...body } : undefined);
      this.clean = true;
      return answer;
    } catch (e) {
      // The server answered the request (an error inside the environment, a refused body): the environment is as it was.
      if (!(e instanceof SessionLostError) && e instanceof RemoteEnvError && e.status !== null && e.status < 500) this.clean = true;
      throw e;
    }
  }

  private async observation(answer: unknown): Promise<string> {
    if (isObject(answer)) {
      if (typeof answer.observation === 'string') return answer.observation;
      if (typeof answer.state === 'string') return answer.state;
    }
    const obs = await this.request('GET', '/observation');
    if (typeof obs === 'string') return obs;
    if (isObject(obs) && typeof obs.observation === 'string') return obs.observation;
    throw new RemoteEnvError(`${this.env.label}: GET /observation: malformed answer ${JSON.stringify(obs)?.slice(0, 200)}`);
  }

  private async actions(answer: unknown): Promise<string[]> {
    const available = isObject(answer) && 'available_actions' in answer ? answer.available_actions : await this.request('GET', '/available_actions');
    try {
      return this.env.options.actions?.(available) ?? stringList(available);
    } catch (e) {
      throw new RemoteEnvError(`${this.env.label}: malformed available actions ${JSON.stringify(available)?.slice(0, 200)}: ${(e as Error).message}`);
    }
  }

  private info(won: boolean): EnvInfo {
    return { won, task_type: this.taskType };
  }

  async reset(): Promise<ResetResult> {
    try {
      return await this.resetHere();
    } catch (e) {
      if (!(e instanceof SessionLostError)) throw e;
      // The pooled environment went with a restart of the server: once more in a new one.
      this.slot = await this.env.newSlot();
      return await this.resetHere();
    }
  }

  private async resetHere(): Promise<ResetResult> {
    const answer = await this.request('POST', '/reset', this.env.options.resetFields(this.index));
    if (isObject(answer) && typeof answer.task_type === 'string') this.taskType = this.env.options.taskType?.(answer.task_type) ?? answer.task_type;
    const observation = await this.observation(answer);
    this.task = this.env.options.taskText?.(observation) ?? '';
    this.admissible = await this.actions(answer);
    return { observation, admissible_actions: this.admissible, info: this.info(false) };
  }

  async step(action: string): Promise<StepResult> {
    const sent = this.env.options.translateAction?.(action, this.admissible) ?? action;
    const answer = await this.request('POST', '/step', { action: sent });
    if (!isObject(answer)) throw new RemoteEnvError(`${this.env.label}: POST /step: malformed answer ${JSON.stringify(answer)?.slice(0, 200)}`);
    const raw = Number(answer.reward ?? 0);
    const done = answer.done === true;
    const won = this.env.options.isWon
      ? this.env.options.isWon(raw, done, answer)
      : typeof answer.won === 'boolean' ? answer.won : done && raw >= 1;
    const observation = await this.observation(answer);
    this.admissible = done && !('available_actions' in answer) ? [] : await this.actions(answer);
    const info = this.info(won);
    if (this.env.options.nativeScore) info.score = raw;
    // The outcome on the trainer's convention: the success return once, when the episode is won.
    return { observation, reward: won && done ? this.env.successReturn : 0, done, admissible_actions: this.admissible, info };
  }

  /** Hands the environment back to the pool (AgentGym has no route that releases one). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.env.release(this.slot, this.clean);
  }
}
