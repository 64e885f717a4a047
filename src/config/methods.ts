// A run's method as the trainer drives it: the definition its config names
// (src/algos/methods/), that method's resolved options, and the state it carries
// across iterations. The trainer asks it for each iteration's plan and tells it what
// happened; it never names a method.

import { envPlugin } from '../../envs/registry.ts';
import type { AnyMethod, MethodEvent } from '../algos/method.ts';
import { methodDefinition } from '../algos/methods/index.ts';
import type { IterationPlan } from '../algos/plan.ts';
import type { TrainConfig } from './config_schema.ts';

export interface RunMethod {
  readonly def: AnyMethod;
  readonly options: unknown;
  /** Saved in checkpoints, so a resumed run continues where the method was. */
  readonly state: unknown;
  /** The plan of a 1-based iteration. */
  plan(iteration: number): IterationPlan;
  /** Tells the method an event; returns a line worth logging, if any. */
  observe(event: MethodEvent): string | null;
}

/** The method of `cfg`, with `state` from a checkpoint or its initial state. */
export function runMethod(cfg: TrainConfig, state?: unknown): RunMethod {
  const def = methodDefinition(cfg.method);
  const options = cfg.algorithm[cfg.method];
  const own = state === undefined ? def.initialState() : state;
  const env = { name: cfg.env.name, successReturn: envPlugin(cfg.env.name).reward.success };
  return {
    def,
    options,
    state: own,
    plan: (iteration) => {
      if (!def.plan) throw new Error(`method ${def.name} is trained by the ${def.loop} loop and has no RL plan`);
      return def.plan({ iteration, options, entropyCoef: cfg.algorithm.entropyCoef, env, state: own });
    },
    observe: (event) => def.observe?.(own, event, options) ?? null,
  };
}
