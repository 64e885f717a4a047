// A training method as one object (src/algos/methods/<name>.ts, listed once in
// src/algos/methods/index.ts): its options (a zod schema, the config's
// algorithm.<name> block) and their per-environment defaults, which loop runs it,
// its plan for each RL iteration, the state it carries across iterations, and, for
// staged methods, the runs it is made of. The trainer knows methods only through this.

import type { z } from 'zod';
import type { IterationPlan } from './plan.ts';

/** What a plan may read besides the method's own options. */
export interface PlanContext<Options, State> {
  /** 1-based. */
  iteration: number;
  options: Options;
  /** The backbone's entropy coefficient (algorithm.entropyCoef). */
  entropyCoef: number;
  /** The environment's name and the return of a won episode. */
  env: { name: string; successReturn: number };
  state: State;
}

/** Something the trainer tells a method with state, so it can decide what later plans do. */
export type MethodEvent =
  /** The frozen teacher's validation success with the skills block, measured once before training. */
  | { kind: 'teacher_validation'; success: number }
  /** An iteration's metrics (teacher gap, losses...). */
  | { kind: 'iteration'; iteration: number; metrics: Readonly<Record<string, number>> }
  | { kind: 'validation'; iteration: number; success: number };

/** One run of a staged method: `method` for `iterations` into the run directory named with `suffix`. */
export interface Stage<Options> {
  suffix: string;
  method: string;
  iterations: number;
  /** The staged method's options for this stage, given the checkpoint the previous stage ended with. */
  options?: (previousCheckpoint: string) => Options;
}

export interface MethodDefinition<Schema extends z.ZodObject = z.ZodObject, Options = z.output<Schema>, State = null> {
  readonly name: string;
  /** One line for the CLI's and README's method tables. */
  readonly summary: string;
  /** The config's algorithm.<name> block. */
  readonly options: Schema;
  /** Fills options the environment decides (left unset by the schema). */
  resolve(options: z.output<Schema>, env: string): Options;
  /** Set for methods that are this project's reading of a paper without public code; printed when a run starts. */
  readonly interpreted?: string;
  /** Which loop trains it: the RL iteration or supervised fine-tuning. */
  readonly loop: 'rl' | 'sft';
  /** A method made of several runs (RetireOPD without a teacher: Skill-GRPO, then distillation); null runs it directly. */
  stages?(options: Options, iterations: number): Stage<Options>[] | null;
  /** A model or checkpoint that scores as the teacher instead of the current weights. */
  frozenTeacher?(options: Options): string | null;
  /** State carried across iterations and saved in checkpoints. */
  initialState(): State;
  observe?(state: State, event: MethodEvent, options: Options): string | null;
  /** The plan of every RL iteration (not called for the SFT loop). */
  plan?(ctx: PlanContext<Options, State>): IterationPlan;
}

type AnyMethod = MethodDefinition<z.ZodObject, unknown, unknown>;

/** Declares a method; `resolve` defaults to the options as parsed, `initialState` to null. */
export function defineMethod<Schema extends z.ZodObject, Options = z.output<Schema>, State = null>(
  def: Omit<MethodDefinition<Schema, Options, State>, 'resolve' | 'initialState'> &
    Partial<Pick<MethodDefinition<Schema, Options, State>, 'resolve' | 'initialState'>>,
): MethodDefinition<Schema, Options, State> {
  return {
    resolve: (options) => options as unknown as Options,
    initialState: () => null as State,
    ...def,
  } as MethodDefinition<Schema, Options, State>;
}

export type { AnyMethod };
