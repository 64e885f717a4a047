// An Environment backed by an AgentGym-style server (agentenv-alfworld, -webshop, ...):
// POST /create, POST /reset, POST /step keyed by "id" or "env_idx", failures reported
// as 200 + {"error": ...}. Lets the real ALFWorld/WebShop servers of that ecosystem
// stand in for our built-in environments. Their rewards come on their own scales
// (ALFWorld 0/1, WebShop the purchase score); the adapter reports the episode's
// outcome on the trainer's convention instead, the environment's success return for a
// won episode and 0 otherwise, so returns and the invalid-action penalty mean the same
// as with the built-in environment. A server's own score stays in info.score.

import { fetchJson, isObject, isStringArray, RemoteEnvError } from './http_json.ts';
import type { CreateOptions, EnvInfo, EnvSession, Environment, ResetResult, StepResult } from './types.ts';

export interface AgentGymOptions {
  /** Environment name for labels and the default task_type ("alfworld"). */
  name: string;
  version?: string;
  maxSteps: number;
  /** Request field carrying the session: "id" (ALFWorld) or "env_idx" (WebShop). Default: "id" when /create answers {"id"}, "env_idx" when it answers a bare number. */
  idField?: 'id' | 'env_idx';
  /** The /reset fields choosing the task; AgentGym has no splits, so the seed is the task index by default. */
  resetFields?: (opts: CreateOptions) => Record<string, unknown>;
  /** Whether the episode was won; default: the answer's "won" if present, else done with reward >= 1. */
  isWon?: (reward: number, done: boolean, answer: Record<string, unknown>) => boolean;
  /** The task sentence from the first observation. */
  taskText?: (observation: string) => string;
  /** The task type from the server's label (ALFWorld's is the game's path). */
  taskType?: (label: string) => string;
  /** The action as the server words it, given what it admits (a policy trained on another grammar). */
  translateAction?: (action: string, admissible: readonly string[]) => string;
  /** The server's reward is a native score worth reporting (WebShop's purchase score). */
  nativeScore?: boolean;
  /** Path that releases a session; servers without it (404/405) are fine. null: never call. */
  closePath?: string | null;
  timeoutMs?: number;
}

/** Available actions as AgentGym servers send them: a list, or WebShop's {has_search_bar, clickables}. */
export function normalizeActions(v: unknown): string[] {
  if (isStringArray(v)) return v;
  if (isObject(v) && isStringArray(v.clickables)) {
    return [...(v.has_search_bar === true ? ['search[<query>]'] : []), ...v.clickables.map((c) => `click[${c}]`)];
  }
  return [];
}

export class AgentGymEnvironment implements Environment {
  readonly name: string;
  readonly version: string;
  readonly maxSteps: number;
  readonly url: string;
  readonly options: AgentGymOptions;

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

  /** One request; non-2xx answers and 200 + {"error"} both become RemoteEnvError naming the request. */
  async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    const answer = await fetchJson({ label: this.label, baseUrl: this.url, method, path, body, timeoutMs: this.options.timeoutMs ?? 60_000 });
    const error = isObject(answer.body) && 'error' in answer.body ? answer.body.error : undefined;
    if (answer.status < 200 || answer.status >= 300 || error !== undefined) {
      const detail = typeof error === 'string' ? error : isObject(answer.body) && typeof answer.body.detail === 'string' ? answer.body.detail : JSON.stringify(answer.body);
      throw new RemoteEnvError(`${this.label}: ${method} ${path} -> ${answer.status}: ${detail}`, answer.status);
    }
    return answer.body;
  }

  async create(opts: CreateOptions): Promise<AgentGymSession> {
    const answer = await this.call('POST', '/create');
    let id: string | number;
    let idField = this.options.idField;
    if (typeof answer === 'number' || typeof answer === 'string') {
      id = answer;
      idField ??= 'env_idx';
    } else if (isObject(answer) && (typeof answer.id === 'number' || typeof answer.id === 'string')) {
      id = answer.id;
      idField ??= 'id';
    } else {
      throw new RemoteEnvError(`${this.label}: POST /create: malformed answer ${JSON.stringify(answer)?.slice(0, 200)}`);
    }
    return new AgentGymSession(this, opts, id, idField);
  }
}

export class AgentGymSession implements EnvSession {
  task = '';
  private taskType: string;
  private closed = false;
  private admissible: string[] = [];

  constructor(
    private readonly env: AgentGymEnvironment,
    private readonly opts: CreateOptions,
    readonly id: string | number,
    readonly idField: 'id' | 'env_idx',
  ) {
    this.taskType = env.name;
  }

  private query(path: string): string {
    return `${path}?${this.idField}=${encodeURIComponent(String(this.id))}`;
  }

  private async observation(answer: unknown): Promise<string> {
    if (isObject(answer)) {
      if (typeof answer.observation === 'string') return answer.observation;
      if (typeof answer.state === 'string') return answer.state;
    }
    const obs = await this.env.call('GET', this.query('/observation'));
    if (typeof obs === 'string') return obs;
    if (isObject(obs) && typeof obs.observation === 'string') return obs.observation;
    throw new RemoteEnvError(`${this.env.label}: GET /observation: malformed answer ${JSON.stringify(obs)?.slice(0, 200)}`);
  }

  private async actions(answer: unknown): Promise<string[]> {
    if (isObject(answer)) {
      for (const key of ['available_actions', 'admissible_actions', 'admissible_commands']) {
        if (key in answer) return normalizeActions(answer[key]);
      }
    }
    return normalizeActions(await this.env.call('GET', this.query('/available_actions')));
  }

  private info(won: boolean): EnvInfo {
    return { won, task_type: this.taskType };
  }

  async reset(): Promise<ResetResult> {
    const fields = (this.env.options.resetFields ?? ((o: CreateOptions) => ({ data_idx: o.seed })))(this.opts);
    const answer = await this.env.call('POST', '/reset', { [this.idField]: this.id, ...fields });
    if (isObject(answer) && typeof answer.task_type === 'string') this.taskType = this.env.options.taskType?.(answer.task_type) ?? answer.task_type;
    const observation = await this.observation(answer);
    this.task = this.env.options.taskText?.(observation) ?? '';
    this.admissible = await this.actions(answer);
    return { observation, admissible_actions: this.admissible, info: this.info(false) };
  }

  async step(action: string): Promise<StepResult> {
    const sent = this.env.options.translateAction?.(action, this.admissible) ?? action;
    const answer = await this.env.call('POST', '/step', { [this.idField]: this.id, action: sent });
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

  async close(): Promise<void> {
    const path = this.env.options.closePath === undefined ? '/close' : this.env.options.closePath;
    if (this.closed || path === null) return;
    this.closed = true;
    try {
      await this.env.call('POST', path, { [this.idField]: this.id });
    } catch (e) {
      if (!(e instanceof RemoteEnvError && (e.status === 404 || e.status === 405))) throw e;
    }
  }
}
