// The environment contract shared by the in-process environments (top-level envs/),
// the HTTP server that exposes them, and the clients that speak to remote servers.
// Field names follow the wire protocol (docs/PROTOCOLS.md section 4).

export type Split = 'train' | 'valid_seen' | 'valid_unseen';

export const SPLITS: readonly Split[] = ['train', 'valid_seen', 'valid_unseen'];

/**
 * The task sets of a server that numbers its tasks (AgentGym's): the run trains on
 * `train`, validates on `validation`, and `eval` plays `test` by default.
 */
export type ServerSplit = 'train' | 'validation' | 'test';

export const SERVER_SPLITS: readonly ServerSplit[] = ['train', 'validation', 'test'];

/** The split a task belongs to: an environment's own, or a server's task set. */
export type TaskSplit = Split | ServerSplit;

export function isSplit(s: string): s is Split {
  return (SPLITS as readonly string[]).includes(s);
}

export interface EnvInfo {
  won: boolean;
  /** Task family label used for skills and per-type metrics (e.g. pick_and_place). */
  task_type: string;
  [key: string]: unknown;
}

export interface ResetResult {
  observation: string;
  admissible_actions: string[];
  info: EnvInfo;
}

export interface StepResult {
  observation: string;
  reward: number;
  done: boolean;
  admissible_actions: string[];
  info: EnvInfo;
}

/** One episode of one task. */
export interface EnvSession {
  /** The task description shown to the agent (e.g. "put some spraybottle on toilet."). */
  readonly task: string;
  /** The server holding the session, when the environment is a pool of servers. */
  readonly server?: string;
  reset(): Promise<ResetResult> | ResetResult;
  step(action: string): Promise<StepResult> | StepResult;
  close(): Promise<void> | void;
}

export interface CreateOptions {
  /** In-process environments and our protocol's servers know only their own splits (Split). */
  split: TaskSplit;
  seed: number;
  /** An explicit task (environment-specific JSON) instead of one drawn from the seed. */
  task?: unknown;
}

/** An environment kind: household, shop, search. */
export interface Environment {
  readonly name: string;
  readonly version: string;
  /** Per-episode turn cap. */
  readonly maxSteps: number;
  create(opts: CreateOptions): Promise<EnvSession> | EnvSession;
  /**
   * A server's: confirms, before the first episode, that it answers and serves this
   * kind of environment; throws saying which server, what it answered and what to do.
   */
  check?(): Promise<void>;
  /**
   * How many distinct tasks `split` holds when it is a finite set (a search dataset's
   * rows), for an evaluation that plays all of them; null (or absent) when tasks are
   * drawn from seeds without end.
   */
  taskCount?(split: TaskSplit): Promise<number | null>;
}
