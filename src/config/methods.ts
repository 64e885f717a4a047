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

/** The RL methods a run trains with: its own, or each stage's. */
function rlMethodsOf(cfg: TrainConfig): TrainConfig[] {
  const def = methodDefinition(cfg.method);
  const stages = def.stages?.(cfg.algorithm[cfg.method], cfg.iterations);
  const runs = stages ? stages.map((st) => ({ ...cfg, method: st.method as TrainConfig['method'], iterations: st.iterations })) : [cfg];
  return runs.filter((r) => methodDefinition(r.method).loop === 'rl');
}

/**
 * What one run per task (rollout.groupSize 1) does to the run's methods. The group of
 * GRPO's advantage is then one episode's turns, which share its return: the advantage
 * tells valid turns from invalid ones, never success from failure. A method that learns
 * only from it is refused; one with a teacher term still learns from that, with a warning.
 */
export function singleRunProblem(cfg: TrainConfig): { refuse: string } | { warn: string } | null {
  if (cfg.rollout.groupSize !== 1) return null;
  const why = 'with one run per task the group is one episode\'s turns, which share its return, so the advantage tells valid turns from invalid ones, never success from failure';
  let policyGradient = false;
  for (const run of rlMethodsOf(cfg)) {
    const method = runMethod(run);
    const plans = Array.from({ length: run.iterations }, (_, i) => method.plan(i + 1));
    const pg = plans.some((p) => p.policyGradient);
    if (pg && !plans.some((p) => p.teacher || p.aux)) return { refuse: `${run.method} learns only from GRPO's group-relative advantage, and ${why}; set rollout.groupSize to 2 or more` };
    policyGradient ||= pg;
  }
  return policyGradient ? { warn: `rollout.groupSize 1: ${why}; ${cfg.method} still learns from its teacher's term` } : null;
}
