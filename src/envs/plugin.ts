// What an environment kind brings to the trainer, in one object per kind
// (envs/<name>/plugin.ts, listed once in envs/registry.ts): how to make it in-process,
// its turn contract, the reference recipe's settings for it, its reward scale, an
// expert's demonstrations when it has one, and how AgentGym's server for it speaks.
// The trainer, the rollout loop and the CLI know environments only through this.

import type { ReasoningFormat } from '../tokenizer/thinking.ts';
import type { z } from 'zod';
import type { AgentGymOptions } from './agentgym.ts';
import type { AgentSpec } from './agent_spec.ts';
import type { Environment, Split } from './types.ts';

/** The reference launchers' settings for an environment, the defaults of a run on it. */
export interface EnvRecipe {
  tasksPerIteration: number;
  maxTurns: number;
  maxPromptTokens: number;
  klCoef: number;
  /** c_inv: subtracted from the score of a turn whose response is not a well-formed action. */
  invalidPenalty: number;
  miniBatchSize: number;
  /** 0 validates only after the last iteration. */
  validationEvery: number;
  validationTasks: number;
  /** 0 is greedy. */
  validationTemperature: number;
  /** Share of the run's iterations the learning rate warms up over. */
  warmupRatio: number;
}

export interface RewardScale {
  /** The return of a won episode (household and shop 10, search 1). */
  success: number;
}

/** One turn of an expert demonstration as the agent loop would show it to the model. */
export interface ExpertTurn {
  /** The user message of the turn (the agent loop's prompt before the chat template). */
  prompt: string;
  /** The answer in the environment's format. */
  response: string;
  split: Split;
  seed: number;
  turn: number;
  taskType: string;
  /** The prompt carries the skills block. */
  withSkills?: boolean;
  /** The answer's ids as an engine sampled them (rollout logs); absent for text, which the chat template renders. */
  responseIds?: readonly number[];
}

export interface ExpertDataOptions {
  split?: Split;
  /** World seeds to play, one episode each. */
  seeds: Iterable<number>;
  /** Chance that a turn starts with a detour (a random move that is not a sample); the expert recovers. */
  detour?: number;
  /** Most detours per episode. */
  maxDetours?: number;
  /** Share of episodes played with the skill cards in the prompt by an expert that follows them. */
  skillsShare?: number;
  /** Seed of the data's own draws (detours, which episodes carry skills). */
  rngSeed?: number;
  /** Where the answers' reasoning goes, as the model's thinking mode asks (default 'tags'). */
  reasoning?: ReasoningFormat;
}

/** Demonstrations written directly by an environment's expert (faster and richer than replaying info.expert_action). */
export interface ExpertData {
  /** Recovery detours per expert turn in the data the trainer's SFT generates. */
  defaultDetour: number;
  samples(opts: ExpertDataOptions): Iterable<ExpertTurn>;
  /** Prompts and responses of `seedsPerSplit` episodes of every split, for a word-level vocabulary. */
  corpus(seedsPerSplit: number): Iterable<string>;
}

export interface EnvPlugin<Schema extends z.ZodObject = z.ZodObject> {
  /** The name configs and the CLI use. */
  readonly name: string;
  /** Other names servers of this kind report (AgentGym's "alfworld"); they get the same turn contract. */
  readonly aliases: readonly string[];
  readonly description: string;
  /** The environment's own settings: the config's env.<name> block. */
  readonly options: Schema;
  /** A fresh in-process environment with these settings. */
  create(options: z.output<Schema>): Environment;
  readonly agent: AgentSpec;
  /** The turn contract under these settings, where they change it (search's parsing); default `agent`. */
  agentFor?(options: z.output<Schema>): AgentSpec;
  /** The settings with the defaults that follow the training method filled in (search parses as the method's reference does). */
  resolveOptions?(options: z.output<Schema>, method: string): z.output<Schema>;
  /**
   * The longest one step can take by these settings before it fails on its own (a
   * search step's retries against its retriever), and which settings make it so: the
   * config refuses an env.timeoutMs that would cut such a step short.
   */
  longestStep?(options: z.output<Schema>): { ms: number; settings: string } | null;
  /**
   * Why an in-process environment with these settings has no tasks for `split` (search
   * given question files for other splits only): the option (a key of env.<name>) that
   * would give them, and what is missing. The config refuses a run that plays such a
   * split, before any work.
   */
  unplayable?(options: z.output<Schema>, split: Split): { key: string; message: string } | null;
  readonly recipe: EnvRecipe;
  readonly reward: RewardScale;
  readonly expert?: ExpertData;
  /** How AgentGym's server for this kind is driven, when it has one. */
  readonly agentgym?: AgentGymOptions;
}

/** Declares an environment plugin; the registry holds it with its option types erased (the config has checked them). */
export function defineEnv<Schema extends z.ZodObject>(plugin: EnvPlugin<Schema>): EnvPlugin {
  return plugin as unknown as EnvPlugin;
}
