// The training-run configuration: one zod schema for every setting. Environments
// (envs/registry.ts) and methods (src/algos/methods/index.ts) contribute their parts:
// the environment names, the settings each environment's reference recipe sets
// (turn cap, token budgets, KL coefficient, invalid-action penalty, mini-batch size,
// validation...), and each method's algorithm.<method> block. Settings whose default
// depends on the environment are left unset by the schema and filled by
// resolveConfig, so a file that names only `env.name: search` gets the search
// recipe, while anything it sets explicitly wins.

import { THINKING_MODES } from '../tokenizer/thinking.ts';
import { z } from 'zod';
import { ENV_PLUGINS, envPlugin } from '../../envs/registry.ts';
import { METHOD_DEFINITIONS, METHOD_NAMES, methodDefinition, type MethodName } from '../algos/methods/index.ts';
import { nonNegInt, nonNegNum, posInt, posNum } from '../algos/options.ts';
import { DEFAULT_ROLLOUT_CORRECTION_MODE, ROLLOUT_CORRECTION_MODES, defaultCap, type RolloutCorrection } from '../algos/rollout_correction.ts';
import { SKILLS_PLACEMENTS } from '../envs/skills_block.ts';
import { taskIndexProblem, taskIndices, type TaskIndexSpec } from '../envs/task_indices.ts';
import { SERVER_SPLITS, type ServerSplit } from '../envs/types.ts';

/** Every method (docs/ALGORITHMS.md section 3), supervised fine-tuning included. */
export const METHODS: readonly MethodName[] = METHOD_NAMES;
export type Method = MethodName;

export const ENV_NAMES: readonly string[] = ENV_PLUGINS.map((p) => p.name);
export type EnvName = string;

export const DEFAULT_MODEL_PATH = 'models/household-tiny';
export const DEFAULT_LORA_TARGET_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

const url = z.url({ protocol: /^https?$/ });
const name = z.string().min(1);

const loraSchema = z.strictObject({
  r: posInt.default(16),
  alpha: posNum.default(32),
  targetModules: z.array(name).min(1).default(DEFAULT_LORA_TARGET_MODULES),
  useRslora: z.boolean().default(false),
});

const modelSchema = z.strictObject({
  /** Hugging Face checkpoint directory, or a Hub id (owner/name) that the CLI downloads into the Hugging Face cache and replaces with its snapshot directory. */
  path: name.default(DEFAULT_MODEL_PATH),
  /** LoRA adapters (the base freezes), or null to train the weights themselves. */
  lora: loraSchema.nullable().default(null),
  /** Full fine-tuning: parameter-name substrings to train (null: every parameter). Ignored with LoRA. */
  trainable: z.array(name).min(1).nullable().default(null),
  /**
   * The chat template's enable_thinking (Qwen3, Qwen3.5): off passes false, as the SDAR
   * reference's Qwen3 launchers do; on passes true; default leaves it to the template.
   * The environment prompts ask for reasoning where the template then puts it
   * (src/tokenizer/thinking.ts); templates without the switch ignore it.
   */
  thinking: z.enum(THINKING_MODES).default('off'),
});

/** Each environment's own settings, env.<name> (a plugin's options schema), every option with its default. */
const envOptions = Object.fromEntries(ENV_PLUGINS.map((p) => [p.name, p.options.prefault({})])) as Record<string, z.ZodPrefault<z.ZodObject>>;

/** Task indices of a server that numbers its tasks: a range "A-B" (inclusive) or a list. */
const taskIndexSpec = z.union([z.string(), z.array(z.number())]).superRefine((v, ctx) => {
  const problem = taskIndexProblem(v);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem, input: v });
});

/** An AgentGym server's task sets (docs/AGENTGYM.md); unset fields take the AgentGym package's layout. */
const serverTasksSchema = z.strictObject({
  train: taskIndexSpec.optional(),
  validation: taskIndexSpec.optional(),
  test: taskIndexSpec.optional(),
  /** Tasks the server holds (default: its AgentGym package's, 2,620 ALFWorld games or 6,910 WebShop goals). */
  count: posInt.optional(),
});

const envSchema = z.strictObject({
  name: z.enum(ENV_NAMES as [string, ...string[]]).default('household'),
  /** An environment server (docs/PROTOCOLS.md), or a list of them (each episode's session on one); unset runs the built-in environment in-process. */
  url: z.union([url, z.array(url).min(1)]).optional(),
  /** The server speaks AgentGym's protocol instead of ours. */
  agentgym: z.boolean().default(false),
  trainSplit: z.enum(['train', 'valid_seen', 'valid_unseen']).default('train'),
  /** With env.agentgym: the server's task indices the run trains on, validates on and evaluates on. */
  tasks: serverTasksSchema.prefault({}),
  /** Deadline for each environment call. */
  timeoutMs: posInt.default(120_000),
  /**
   * Share of an iteration's (or a validation's) episodes that may fail in the
   * environment (server errors, timeouts) before the run stops; every one failing
   * always stops it (src/rollout/env_failures.ts).
   */
  maxFailedShare: z.number().min(0).max(1).default(0.2),
  ...envOptions,
});

const engineFields = {
  engine: z.enum(['local', 'http']).default('local'),
  /** OpenAI-compatible servers (vLLM, our `serve`) for engine http: a base URL or a list of them. */
  url: z.union([url, z.array(url).min(1)]).optional(),
  /** Model name at the server (default: the base model its /v1/models lists). */
  model: name.optional(),
  /** Bearer token for the servers (vLLM's --api-key); default: VLLM_API_KEY, else OPENAI_API_KEY. Never written to the run directory. */
  apiKey: name.optional(),
  /**
   * How long a server that does not answer is waited for, in seconds (unset: 300): at the
   * start one still starting, mid-run one restarting (5xx, no connection). Set, the start
   * also waits that long for a server that refuses connections (its process not yet
   * listening); unset, such a server stops the run within seconds.
   */
  serverWaitSeconds: posNum.optional(),
  /** With several servers: start once every one answers and passes the checks, rather than with those that do (the others join as they come up). */
  waitForAllServers: z.boolean().default(false),
  /** With several servers: how long a failing one is retried before it leaves the pool and its episodes start over on the others. */
  failoverSeconds: posNum.default(15),
  /**
   * Weights check: the mean absolute difference, in nats per token, between the
   * server's and the trainer's log-probs of a fixed probe sequence above which the
   * server is taken to hold other weights (src/fleet/weight_probe.ts).
   */
  probeTolerance: posNum.default(0.1),
};

const rolloutSchema = z.strictObject({
  ...engineFields,
  tasksPerIteration: posInt.optional(),
  /** G: runs of each task, one group. */
  groupSize: posInt.default(8),
  maxTurns: posInt.optional(),
  temperature: nonNegNum.default(1),
  topP: z.number().gt(0).max(1).default(1),
  /** 0 disables top-k. */
  topK: nonNegInt.default(0),
  maxPromptTokens: posInt.optional(),
  maxResponseTokens: posInt.default(512),
  /**
   * End each response at its action's closing tag (search's </search>, </answer>)
   * and train only up to there: faster, but the end-of-turn token is never trained.
   * Default: responses run to the end of the turn, as the references generate them,
   * and the environment's reading decides what is kept (search read as Search-R1 cuts
   * what follows the action, as SDAR keeps it whole).
   */
  stopAfterAction: z.boolean().default(false),
  /** Episodes live at once (unset: all of an iteration's). */
  concurrency: posInt.optional(),
  /** Rows the local engine decodes together; more rows mean fewer decoding steps per turn and more memory for the KV cache. */
  maxBatch: posInt.default(64),
  /**
   * How a turn's prompt carries the episode so far: `window`, the environment's prompt
   * rendered fresh with its K most recent turns, as the reference does; or
   * `conversation`, one chat that grows by each response and the environment's answer
   * (docs/PROTOCOLS.md section 1.4), whose turns can be trained as one sequence.
   */
  history: z.enum(['window', 'conversation']).default('window'),
});

/** Who scores sampled tokens for the self-distillation methods: this trainer's own weights, or a server. */
const teacherSchema = z.strictObject({
  ...engineFields,
  /**
   * Where the teacher prompt puts the skills block: before_template, as raw text in
   * front of the templated prompt as the SDAR reference does, or at the start of the
   * turn's user message (the chat template frames it like the rest of the prompt).
   */
  skillsPlacement: z.enum(SKILLS_PLACEMENTS).default('before_template'),
});

type MethodOptionSchemas = { [K in MethodName]: z.ZodPrefault<(typeof METHOD_DEFINITIONS)[K]['options']> };

/** Each method's algorithm.<method> block, every option with its default. */
const methodOptions = Object.fromEntries(METHOD_NAMES.map((m) => [m, methodDefinition(m).options.prefault({})])) as unknown as MethodOptionSchemas;

/** How the engine's own log-probs correct the policy gradient (docs/ALGORITHMS.md section 1.9). */
const rolloutCorrectionSchema = z.strictObject({
  /**
   * off, tis (token ratio truncated at C), seq-tis (the turn's ratio truncated), mask
   * (tokens outside [1/C, C] left out), seq-mask (turns outside it left out), bypass (the
   * engine's log-probs are the old policy's: no pass recomputes them).
   */
  mode: z.enum(ROLLOUT_CORRECTION_MODES).default(DEFAULT_ROLLOUT_CORRECTION_MODE),
  /** C. Unset: 2 for tis and seq-tis (verl's threshold), 3 for mask and seq-mask (TRL's). */
  cap: z.number().gt(1).optional(),
}).refine((c) => c.cap === undefined || (c.mode !== 'off' && c.mode !== 'bypass'), {
  path: ['cap'], message: 'mode off and mode bypass weigh no token, so they take no cap',
});

const algorithmSchema = z.strictObject({
  clipLow: z.number().min(0).lt(1).default(0.2),
  clipHigh: nonNegNum.default(0.2),
  /** Dual-clip constant; 0 disables it. */
  dualClip: z.number().refine((v) => v === 0 || v > 1, 'expected 0 (off) or a number > 1').default(3),
  klCoef: nonNegNum.optional(),
  entropyCoef: nonNegNum.default(0.001),
  invalidPenalty: nonNegNum.optional(),
  rolloutCorrection: rolloutCorrectionSchema.prefault({}),
  ...methodOptions,
});

const optimSchema = z.strictObject({
  /**
   * The reference recipes' 1e-6 for real Qwen checkpoints (1.5B-7B). The bundled
   * few-million-parameter models want far more: the embedded default (default_run.ts)
   * trains models/household-tiny at 1e-4.
   */
  lr: posNum.default(1e-6),
  weightDecay: nonNegNum.default(0.01),
  betas: z.tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)]).default([0.9, 0.999]),
  eps: nonNegNum.default(1e-8),
  /** Gradient-norm clip; 0 disables it. */
  gradClip: nonNegNum.default(1),
  /**
   * Linear warmup over the run's first N iterations: RL iterations (the LR changes
   * once per iteration, as verl's trainer steps it), SFT optimizer steps (each is one
   * of its iterations). Unset: warmupRatio of the run's iterations.
   */
  warmupIterations: nonNegInt.optional(),
  /** Warmup over this share of the run's iterations when warmupIterations is unset (verl's lr_warmup_steps_ratio). Default: the environment's. */
  warmupRatio: z.number().min(0).lt(1).optional(),
  schedule: z.enum(['constant', 'cosine', 'linear']).default('constant'),
  minLr: nonNegNum.default(0),
  /** Turn samples per optimizer step (with merged turns: whole episodes, until they hold this many). */
  miniBatchSize: posInt.optional(),
  /** Tokens (prompt + response) per forward/backward pass. */
  microBatchTokens: posInt.default(8192),
  /**
   * Score and train the turns of an episode as one sequence where each turn's prompt
   * starts with the previous turn's prompt and response (read from the token ids), so
   * the history is read once, not once per turn (docs/ALGORITHMS.md section 1.4); false
   * keeps one sequence per turn.
   */
  mergeTurns: z.boolean().default(true),
});

const validationSchema = z.strictObject({
  /** Every N iterations; 0 only after the last one. */
  every: nonNegInt.optional(),
  /** Panel size: the same seeded tasks at every validation. */
  tasks: posInt.optional(),
  /** Runs of each panel task (distinct sampling seeds); val/success averages them, so more runs, less noise. */
  runs: posInt.default(1),
  seed: nonNegInt.default(1_000_000),
  split: z.enum(['train', 'valid_seen', 'valid_unseen']).default('valid_seen'),
  /** 0 is greedy. */
  temperature: nonNegNum.optional(),
  /** Validate before the first update too (the starting point of the curves). */
  atStart: z.boolean().default(true),
});

const checkpointSchema = z.strictObject({
  /** Every N iterations (and after the last); 0 only after the last. */
  every: nonNegInt.default(10),
  /** Checkpoints kept on disk; 0 keeps all. */
  keepLast: nonNegInt.default(3),
  /**
   * Float type of the checkpoints' model files (full weights; a LoRA adapter when set).
   * Default: what the model.path's weights are stored in, f32 for LoRA adapters. The
   * optimizer state is always f32. A resumed run continues from the saved weights, so
   * only f32 resumes exactly where a run in memory was.
   */
  dtype: z.enum(['bf16', 'f16', 'f32']).optional(),
});

const outputSchema = z.strictObject({
  dir: name.default('runs'),
  /** Default: <env>-<method>-s<seed>. */
  runName: z.string()
    .refine((v) => /^[A-Za-z0-9._-]+$/.test(v) && v !== '.' && v !== '..', 'expected a name of letters, digits, ".", "_" or "-" (a directory under output.dir, not a path)')
    .optional(),
  tensorboard: z.boolean().default(true),
  /** Every trajectory as JSONL (rollouts/iter-N.jsonl). */
  trajectories: z.boolean().default(true),
  /** Progress bars on a terminal, plain lines otherwise; 'none' prints only the per-iteration summary. */
  progress: z.enum(['auto', 'bar', 'plain', 'none']).default('auto'),
});

/** What the run may hold on the GPU (src/memory/memory_plan.ts). */
const gpuSchema = z.strictObject({
  /** The memory budget in GiB (--gpu-memory); unset: 4 GiB, a small laptop GPU's (WebGPU reports no memory size: Dawn's memory-heap properties are not exposed to JavaScript). */
  memory: posNum.optional(),
  /** Recompute each layer in the backward instead of keeping its activations: auto (when the budget needs it), on or off. */
  checkpointing: z.enum(['auto', 'on', 'off']).default('auto'),
});

const TrainConfigSchemaBase = z.strictObject({
  method: z.enum(METHODS).default('grpo'),
  seed: nonNegInt.default(0),
  iterations: posInt.default(150),
  model: modelSchema.prefault({}),
  env: envSchema.prefault({}),
  rollout: rolloutSchema.prefault({}),
  teacher: teacherSchema.prefault({}),
  algorithm: algorithmSchema.prefault({}),
  optim: optimSchema.prefault({}),
  validation: validationSchema.prefault({}),
  checkpoint: checkpointSchema.prefault({}),
  output: outputSchema.prefault({}),
  gpu: gpuSchema.prefault({}),
});

export const TrainConfigSchema = TrainConfigSchemaBase.superRefine((c, ctx) => {
  for (const [key, block] of [['rollout', c.rollout], ['teacher', c.teacher]] as const) {
    if (block.engine === 'http' && !block.url) ctx.addIssue({ code: 'custom', path: [key, 'url'], message: `required when ${key}.engine is "http"`, input: undefined });
  }
  if (c.env.agentgym && !c.env.url) ctx.addIssue({ code: 'custom', path: ['env', 'url'], message: 'required when env.agentgym is true (AgentGym environments are servers)', input: undefined });
  checkServerTasks(c, ctx);
  if (c.optim.warmupIterations !== undefined && c.optim.warmupRatio !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['optim', 'warmupRatio'], message: 'set optim.warmupIterations or optim.warmupRatio, not both', input: c.optim.warmupRatio });
  }
  // Compared only once optim.lr itself is valid, so its own message stands alone.
  if (c.optim.lr > 0 && c.optim.minLr > c.optim.lr) ctx.addIssue({ code: 'custom', path: ['optim', 'minLr'], message: `must not exceed optim.lr (${c.optim.lr})`, input: c.optim.minLr });
  checkSplitsPlayable(c, ctx);
  const longest = envPlugin(c.env.name).longestStep?.(envOptionsOf(c));
  if (longest && longest.ms >= c.env.timeoutMs) {
    ctx.addIssue({ code: 'custom', path: ['env', 'timeoutMs'], message: `must exceed the ${longest.ms} ms one ${c.env.name} step may take (${longest.settings}); raise it or lower those`, input: c.env.timeoutMs });
  }
});

/** The splits an in-process run plays, training's and validation's, each one its environment's settings give tasks for. */
function checkSplitsPlayable(c: z.output<typeof TrainConfigSchemaBase>, ctx: z.RefinementCtx): void {
  const unplayable = envPlugin(c.env.name).unplayable;
  if (!unplayable || c.env.url !== undefined) return;
  const plays = [['training', 'env.trainSplit', c.env.trainSplit], ['validation', 'validation.split', c.validation.split]] as const;
  for (const [phase, setting, split] of plays) {
    const missing = unplayable(envOptionsOf(c), split);
    if (missing) ctx.addIssue({ code: 'custom', path: ['env', c.env.name, missing.key], message: `required: the run's ${phase} plays ${split} (${setting}): ${missing.message}`, input: undefined });
  }
}

/** The AgentGym layout of the config's environment, or null when it has none. */
function agentgymLayout(env: { name: string }) {
  const preset = envPlugin(env.name).agentgym;
  return preset ? { server: preset.server, ...preset.tasks } : null;
}

/**
 * The indices of task set `split` on the run's AgentGym server: env.tasks.<split>, else
 * the AgentGym package's layout. Null when the run's environment is not an AgentGym server.
 */
export function serverTaskSet(env: { name: string; agentgym: boolean; tasks: z.output<typeof serverTasksSchema> }, split: ServerSplit): number[] | null {
  const layout = env.agentgym ? agentgymLayout(env) : null;
  return layout ? taskIndices(env.tasks[split] ?? layout[split]) : null;
}

/** env.tasks only with an AgentGym server, and every index one the server holds: refused before the first rollout. */
function checkServerTasks(c: z.output<typeof TrainConfigSchemaBase>, ctx: z.RefinementCtx): void {
  const given = SERVER_SPLITS.filter((s) => c.env.tasks[s] !== undefined);
  if (!c.env.agentgym) {
    if (given.length || c.env.tasks.count !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['env', 'tasks'], message: 'applies to AgentGym servers (env.agentgym=true); the built-in environments draw tasks by seed (env.trainSplit, validation.split, validation.seed)', input: c.env.tasks });
    }
    return;
  }
  const layout = agentgymLayout(c.env);
  if (!layout) {
    const have = ENV_PLUGINS.filter((p) => p.agentgym).map((p) => `${p.name} (${p.agentgym!.name})`).join(', ');
    ctx.addIssue({ code: 'custom', path: ['env', 'agentgym'], message: `${c.env.name} has no AgentGym server (have ${have})`, input: true });
    return;
  }
  const count = c.env.tasks.count ?? layout.count;
  for (const split of SERVER_SPLITS) {
    const spec: TaskIndexSpec = c.env.tasks[split] ?? layout[split];
    if (taskIndexProblem(spec) !== null) continue;
    const outside = taskIndices(spec).find((i) => i >= count);
    if (outside === undefined) continue;
    const explicit = c.env.tasks[split] !== undefined;
    ctx.addIssue({
      code: 'custom',
      path: explicit ? ['env', 'tasks', split] : ['env', 'tasks', 'count'],
      message: `task ${outside}${explicit ? '' : ` of the default ${split} tasks (${layout[split]})`} is outside the ${count} ${layout.noun} the ${layout.server} server holds (0-${count - 1})`,
      input: explicit ? c.env.tasks[split] : c.env.tasks.count,
    });
  }
  const validation = serverTaskSet(c.env, 'validation');
  if (validation && c.validation.tasks !== undefined && c.validation.tasks > validation.length) {
    ctx.addIssue({ code: 'custom', path: ['validation', 'tasks'], message: `the validation panel takes the first tasks of env.tasks.validation, which has ${validation.length}`, input: c.validation.tasks });
  }
}

/** The schema's output: environment-dependent settings may still be unset. */
export type ParsedConfig = z.output<typeof TrainConfigSchema>;

/** Each method's options as its resolve() fills them for the run's environment. */
export type MethodOptions = { [K in MethodName]: ReturnType<(typeof METHOD_DEFINITIONS)[K]['resolve']> };

type Fill<T, K extends keyof T> = Omit<T, K> & { [P in K]-?: Exclude<T[P], undefined> };

/** A configuration with every default applied: what the trainer runs. */
export interface TrainConfig extends Omit<ParsedConfig, 'rollout' | 'algorithm' | 'optim' | 'validation' | 'output'> {
  rollout: Fill<ParsedConfig['rollout'], 'tasksPerIteration' | 'maxTurns' | 'maxPromptTokens'>;
  algorithm: Omit<Fill<ParsedConfig['algorithm'], 'klCoef' | 'invalidPenalty'>, MethodName | 'rolloutCorrection'> & MethodOptions & { rolloutCorrection: RolloutCorrection };
  optim: Fill<ParsedConfig['optim'], 'miniBatchSize' | 'warmupRatio'>;
  validation: Fill<ParsedConfig['validation'], 'every' | 'tasks' | 'temperature'>;
  output: Fill<ParsedConfig['output'], 'runName'>;
}

/** The settings of the run's environment: its env.<name> block. */
export function envOptionsOf(cfg: { env: Pick<TrainConfig['env'], 'name'> }): Record<string, unknown> {
  return (cfg.env as unknown as Record<string, Record<string, unknown>>)[cfg.env.name];
}

/** The env block with the environment's method-dependent defaults filled in. */
function resolveEnv(c: ParsedConfig): ParsedConfig['env'] {
  const resolve = envPlugin(c.env.name).resolveOptions;
  return resolve ? { ...c.env, [c.env.name]: resolve(envOptionsOf(c), c.method) } : c.env;
}

/** Warmup iterations of a run of `iterations` (SFT: optimizer steps): optim.warmupIterations, else its warmupRatio share. */
export function warmupIterations(optim: TrainConfig['optim'], iterations: number): number {
  return optim.warmupIterations ?? Math.round(optim.warmupRatio * iterations);
}

/** Fills the environment-dependent defaults left unset. */
export function resolveConfig(c: ParsedConfig): TrainConfig {
  const d = envPlugin(c.env.name).recipe;
  const methods = Object.fromEntries(METHOD_NAMES.map((m) => [m, methodDefinition(m).resolve(c.algorithm[m], c.env.name)])) as MethodOptions;
  return {
    ...c,
    env: resolveEnv(c),
    rollout: {
      ...c.rollout,
      tasksPerIteration: c.rollout.tasksPerIteration ?? d.tasksPerIteration,
      maxTurns: c.rollout.maxTurns ?? d.maxTurns,
      maxPromptTokens: c.rollout.maxPromptTokens ?? d.maxPromptTokens,
    },
    algorithm: {
      ...c.algorithm,
      klCoef: c.algorithm.klCoef ?? d.klCoef,
      invalidPenalty: c.algorithm.invalidPenalty ?? d.invalidPenalty,
      rolloutCorrection: { ...c.algorithm.rolloutCorrection, cap: c.algorithm.rolloutCorrection.cap ?? defaultCap(c.algorithm.rolloutCorrection.mode) },
      ...methods,
    },
    optim: { ...c.optim, miniBatchSize: c.optim.miniBatchSize ?? d.miniBatchSize, warmupRatio: c.optim.warmupRatio ?? d.warmupRatio },
    validation: {
      ...c.validation,
      every: c.validation.every ?? d.validationEvery,
      // An AgentGym validation set smaller than the recipe's panel is validated whole.
      tasks: c.validation.tasks ?? Math.min(d.validationTasks, serverTaskSet(c.env, 'validation')?.length ?? Infinity),
      temperature: c.validation.temperature ?? d.validationTemperature,
    },
    output: { ...c.output, runName: c.output.runName ?? `${c.env.name}-${c.method}-s${c.seed}` },
  };
}
