// The tasks a run plays: the training draws, the fixed validation panel and evaluation
// panels, shared by the RL loop, the SFT run and the standalone evaluation so that their
// numbers are measured on the same tasks. Built-in environments name a task by (split,
// seed); an AgentGym server by its own index, from the run's task sets (env.tasks,
// docs/AGENTGYM.md).

import type { ServerSplit, Split } from '../envs/types.ts';
import type { RolloutTask } from '../rollout/agent_loop.ts';
import { serverTaskSet, type TrainConfig } from '../config/config_schema.ts';
import type { Rng } from '../util/random.ts';

/** The built-in environments' seeds are drawn in [0, 1e9). */
const SEED_RANGE = 1_000_000_000;

/** `count` tasks of `split` with environment seeds seed, seed + 1, ...: the same tasks every time. */
export function taskPanel(split: Split, seed: number, count: number): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({ split, seed: seed + i }));
}

/** The first `count` tasks (default all) of an AgentGym server's task set `split`, in the order the config lists them. */
export function serverPanel(cfg: Pick<TrainConfig, 'env'>, split: ServerSplit, count?: number): RolloutTask[] {
  const indices = serverTaskSet(cfg.env, split);
  if (indices === null) throw new Error(`serverPanel: ${cfg.env.name} is not played on an AgentGym server`);
  return indices.slice(0, count).map((seed) => ({ split, seed }));
}

/** Whether the run's tasks are an AgentGym server's indices. */
export function playsServerTasks(cfg: Pick<TrainConfig, 'env'>): boolean {
  return serverTaskSet(cfg.env, 'train') !== null;
}

/**
 * `count` training tasks drawn with `rng` (seeded, so a resumed run draws the same):
 * seeds of env.trainSplit, or indices of an AgentGym server's train set.
 */
export function drawTrainingTasks(cfg: Pick<TrainConfig, 'env'>, rng: Rng, count: number): RolloutTask[] {
  const indices = serverTaskSet(cfg.env, 'train');
  if (indices !== null) return Array.from({ length: count }, () => ({ split: 'train', seed: indices[rng.int(indices.length)] }));
  return Array.from({ length: count }, () => ({ split: cfg.env.trainSplit as Split, seed: rng.nextU32() % SEED_RANGE }));
}

/** The validation panel: validation.tasks tasks from validation.seed of validation.split, or the first of an AgentGym server's validation set. */
export function validationPanel(cfg: Pick<TrainConfig, 'env' | 'validation'>): RolloutTask[] {
  if (playsServerTasks(cfg)) return serverPanel(cfg, 'validation', cfg.validation.tasks);
  return taskPanel(cfg.validation.split as Split, cfg.validation.seed, cfg.validation.tasks);
}
