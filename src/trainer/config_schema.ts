// The training-run configuration: one zod schema for every setting, with the defaults
// of the shared design (ALGORITHMS.md sections 1-4). Settings whose default depends on
// the environment (turn cap, token budgets, KL coefficient, invalid-action penalty,
// mini-batch size, validation temperature...) are left unset by the schema and filled
// by resolveConfig from ENV_DEFAULTS, so a file that names only `env.name: search`
// gets the search recipe, while anything it sets explicitly wins.

import { z } from 'zod';
import { SKILLS_PLACEMENTS } from '../envs/skills_block.ts';

/** Every method of ALGORITHMS.md section 3, plus supervised fine-tuning on expert transcripts. */
export const METHODS = [
  'grpo', 'skill_grpo', 'sdar', 'opsd', 'grpo_opsd', 'rlsd', 'skill_sd', 'retire_opd', 'agent_opsd', 'adrs', 'pcsd', 'gigpo', 'sft',
] as const;
export type Method = (typeof METHODS)[number];

export const ENV_NAMES = ['household', 'shop', 'search'] as const;
export type EnvName = (typeof ENV_NAMES)[number];

export interface EnvDefaults {
  tasksPerIteration: number;
  maxTurns: number;
  maxPromptTokens: number;
  klCoef: number;
  invalidPenalty: number;
  miniBatchSize: number;
  /** 0 validates only after the last iteration. */
  validationEvery: number;
  validationTasks: number;
  /** 0 is greedy. */
  validationTemperature: number;
  /** AgentOPSD credit granularity. */
  agentOpsdGranularity: 'turn' | 'token';
  /** ADRS's adaptive clip and raised entropy while shaping (the WebShop launchers turn both off). */
  adrsAdaptiveClip: boolean;
  adrsActiveEntropy: boolean;
  /** Share of the run's iterations the learning rate warms up over (the search recipe's 0.1). */
  warmupRatio: number;
}

export const ENV_DEFAULTS: Record<EnvName, EnvDefaults> = {
  household: {
    tasksPerIteration: 16, maxTurns: 50, maxPromptTokens: 2048, klCoef: 0.01, invalidPenalty: 0.1, miniBatchSize: 256,
    validationEvery: 5, validationTasks: 32, validationTemperature: 0.4, agentOpsdGranularity: 'turn', warmupRatio: 0,
    adrsAdaptiveClip: true, adrsActiveEntropy: true,
  },
  shop: {
    tasksPerIteration: 16, maxTurns: 15, maxPromptTokens: 4096, klCoef: 0.01, invalidPenalty: 0.1, miniBatchSize: 64,
    validationEvery: 5, validationTasks: 32, validationTemperature: 0.4, agentOpsdGranularity: 'token', warmupRatio: 0,
    adrsAdaptiveClip: false, adrsActiveEntropy: false,
  },
  // Search-R1's recipe validates greedily, once, at the end.
  search: {
    tasksPerIteration: 128, maxTurns: 4, maxPromptTokens: 4096, klCoef: 0.001, invalidPenalty: 0.01, miniBatchSize: 256,
    validationEvery: 0, validationTasks: 128, validationTemperature: 0, agentOpsdGranularity: 'token', warmupRatio: 0.1,
    adrsAdaptiveClip: true, adrsActiveEntropy: true,
  },
};

export const DEFAULT_MODEL_PATH = 'models/household-tiny';
export const DEFAULT_LORA_TARGET_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

const posInt = z.int().min(1);
const nonNegInt = z.int().min(0);
const posNum = z.number().gt(0);
const nonNegNum = z.number().min(0);
const prob = z.number().min(0).max(1);
const url = z.url({ protocol: /^https?$/ });
const name = z.string().min(1);

const loraSchema = z.strictObject({
  r: posInt.default(16),
  alpha: posNum.default(32),
  targetModules: z.array(name).min(1).default(DEFAULT_LORA_TARGET_MODULES),
  useRslora: z.boolean().default(false),
});

const modelSchema = z.strictObject({
  /** Hugging Face checkpoint directory. */
  path: name.default(DEFAULT_MODEL_PATH),
  /** LoRA adapters (the base freezes), or null to train the weights themselves. */
  lora: loraSchema.nullable().default(null),
  /** Full fine-tuning: parameter-name substrings to train (null: every parameter). Ignored with LoRA. */
  trainable: z.array(name).min(1).nullable().default(null),
});

const envSchema = z.strictObject({
  name: z.enum(ENV_NAMES).default('household'),
  /** An environment server (PROTOCOLS.md); unset runs the built-in environment in-process. */
  url: url.optional(),
  /** The server speaks AgentGym's protocol instead of ours. */
  agentgym: z.boolean().default(false),
  trainSplit: z.enum(['train', 'valid_seen', 'valid_unseen']).default('train'),
  /** Deadline for each environment call. */
  timeoutMs: posInt.default(120_000),
});

const engineFields = {
  engine: z.enum(['local', 'http']).default('local'),
  /** OpenAI-compatible server (vLLM) base URL, for engine http. */
  url: url.optional(),
  /** Model name at the server (a LoRA adapter name on vLLM). */
  model: name.optional(),
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
   * Default: responses run to the end of the turn and are trained whole, as the
   * reference generates them; the parser reads the action from the whole text.
   */
  stopAfterAction: z.boolean().default(false),
  /** Episodes live at once (unset: all of an iteration's). */
  concurrency: posInt.optional(),
  /** Rows the local engine decodes together; more rows mean fewer decoding steps per turn and more memory for the KV cache. */
  maxBatch: posInt.default(64),
});

/** Who scores sampled tokens for the self-distillation methods: this trainer's own weights, or a server. */
const teacherSchema = z.strictObject({
  ...engineFields,
  /**
   * Where the teacher prompt puts the skills block: at the start of the turn's user
   * message (the chat template frames it like the rest of the prompt), or
   * before_template, in front of the templated prompt as the SDAR reference does.
   */
  skillsPlacement: z.enum(SKILLS_PLACEMENTS).default('user_message'),
});

const sdarSchema = z.strictObject({ beta: nonNegNum.default(5), coef: nonNegNum.default(0.01) });

const rlsdSchema = z.strictObject({
  lambdaStart: prob.default(0.5),
  decayIterations: posInt.default(100),
  clipLow: posNum.default(0.8),
  clipHigh: posNum.default(1.2),
});

const skillSdSchema = z.strictObject({
  coef: nonNegNum.default(0.001),
  /** exp(min(lθ - lold, ratioCap)). */
  ratioCap: posNum.default(10),
  /** exp(min(-e, gapCap)). */
  gapCap: posNum.default(20),
});

const retireOpdSchema = z.strictObject({
  /** Validations without a shrinking student-teacher gap before the distillation retires. */
  window: posInt.default(3),
  /** Student success needed, as a fraction of the teacher's. */
  fraction: z.number().gt(0).max(1).default(0.9),
  /** Stage-1 teacher: a model or training-checkpoint directory; unset runs stage 1 (Skill-GRPO) first. */
  teacherPath: name.optional(),
  /** Stage 1's iterations when this run makes the teacher (default: the run's `iterations`). */
  stage1Iterations: posInt.optional(),
  beta: nonNegNum.default(5),
  coef: nonNegNum.default(0.01),
});

const agentOpsdSchema = z.strictObject({
  granularity: z.enum(['turn', 'token']).optional(),
  /** m = clip(1 + scale·sign(A)·z, clipLow, clipHigh). */
  scale: nonNegNum.default(0.2),
  clipLow: posNum.default(0.8),
  clipHigh: posNum.default(1.2),
  /** Â = A·((1 - mix) + mix·m). */
  mix: prob.default(0.5),
  /** V0 is clamped to [priorClamp, 1 - priorClamp]. */
  priorClamp: z.number().gt(0).lt(0.5).default(1e-4),
  /**
   * What V0 averages over a group's trajectories: raw_score, each one's first turn's
   * score (R minus that turn's penalty) as the reference code does, or
   * success_rate, R divided by the environment's best return.
   */
  prior: z.enum(['raw_score', 'success_rate']).default('raw_score'),
});

const adrsSchema = z.strictObject({
  /** r' = shapingCoef·m·r. */
  shapingCoef: nonNegNum.default(0.02),
  /** m = σ(gateScale·TVA). */
  gateScale: nonNegNum.default(2),
  /** η while active. */
  eta: nonNegNum.default(0.02),
  /** Shaping is active for iterations startIteration..endIteration (1-based, inclusive). */
  startIteration: posInt.default(21),
  endIteration: posInt.default(70),
  clip: nonNegNum.default(0.2),
  /** Shrink a group's clip by its score spread over the median spread. Default: the environment's (off for shop, as the WebShop launchers). */
  adaptiveClip: z.boolean().optional(),
  /** Raise the entropy coefficient to entropyCoef while shaping is active. Default: the environment's (off for shop). */
  activeEntropy: z.boolean().optional(),
  /** Entropy coefficient while shaping is active. */
  entropyCoef: nonNegNum.default(0.01),
});

/** PCSD is our reading of a paper abstract (ALGORITHMS.md section 3), not a reproduction. */
const pcsdSchema = z.strictObject({
  beta: nonNegNum.default(5),
  /** Weight of the trend in the gate. */
  gamma: nonNegNum.default(1),
  /** Decay of the causal running sum of Δ. */
  decay: prob.default(0.9),
  /** Tokens over which the trend (slope of S) is measured. */
  trendWindow: posInt.default(4),
  coef: nonNegNum.default(0.01),
});

const gigpoSchema = z.strictObject({
  /** w in A = A_episode + w·A_step. */
  stepWeight: nonNegNum.default(1),
  /** Discount of the episode return back to each turn, for the step groups. */
  gamma: prob.default(0.95),
});

const sftSchema = z.strictObject({
  /** JSONL of trajectory records to imitate; unset generates them with the environment's expert. */
  data: name.optional(),
  /** Expert episodes per epoch when generating. */
  episodes: posInt.default(64),
  epochs: posInt.default(1),
});

const algorithmSchema = z.strictObject({
  clipLow: z.number().min(0).lt(1).default(0.2),
  clipHigh: nonNegNum.default(0.2),
  /** Dual-clip constant; 0 disables it. */
  dualClip: z.number().refine((v) => v === 0 || v > 1, 'expected 0 (off) or a number > 1').default(3),
  klCoef: nonNegNum.optional(),
  entropyCoef: nonNegNum.default(0.001),
  invalidPenalty: nonNegNum.optional(),
  sdar: sdarSchema.prefault({}),
  rlsd: rlsdSchema.prefault({}),
  skill_sd: skillSdSchema.prefault({}),
  retire_opd: retireOpdSchema.prefault({}),
  agent_opsd: agentOpsdSchema.prefault({}),
  adrs: adrsSchema.prefault({}),
  pcsd: pcsdSchema.prefault({}),
  gigpo: gigpoSchema.prefault({}),
  sft: sftSchema.prefault({}),
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
  /** Samples per optimizer step. */
  miniBatchSize: posInt.optional(),
  /** Tokens (prompt + response) per forward/backward pass. */
  microBatchTokens: posInt.default(8192),
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
});

const outputSchema = z.strictObject({
  dir: name.default('runs'),
  /** Default: <env>-<method>-s<seed>. */
  runName: z.string().regex(/^[A-Za-z0-9._-]+$/, 'expected letters, digits, ".", "_" or "-"').optional(),
  tensorboard: z.boolean().default(true),
  /** Every trajectory as JSONL (rollouts/iter-N.jsonl). */
  trajectories: z.boolean().default(true),
  /** Progress bars on a terminal, plain lines otherwise; 'none' prints only the per-iteration summary. */
  progress: z.enum(['auto', 'bar', 'plain', 'none']).default('auto'),
});

export const TrainConfigSchema = z.strictObject({
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
}).superRefine((c, ctx) => {
  for (const [key, block] of [['rollout', c.rollout], ['teacher', c.teacher]] as const) {
    if (block.engine === 'http' && !block.url) ctx.addIssue({ code: 'custom', path: [key, 'url'], message: `required when ${key}.engine is "http"`, input: undefined });
  }
  if (c.env.agentgym && !c.env.url) ctx.addIssue({ code: 'custom', path: ['env', 'url'], message: 'required when env.agentgym is true (AgentGym environments are servers)', input: undefined });
  if (c.optim.warmupIterations !== undefined && c.optim.warmupRatio !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['optim', 'warmupRatio'], message: 'set optim.warmupIterations or optim.warmupRatio, not both', input: c.optim.warmupRatio });
  }
  if (c.optim.minLr > c.optim.lr) ctx.addIssue({ code: 'custom', path: ['optim', 'minLr'], message: `must not exceed optim.lr (${c.optim.lr})`, input: c.optim.minLr });
  const r = c.algorithm.rlsd;
  if (r.clipLow > r.clipHigh) ctx.addIssue({ code: 'custom', path: ['algorithm', 'rlsd', 'clipLow'], message: `must not exceed algorithm.rlsd.clipHigh (${r.clipHigh})`, input: r.clipLow });
  const a = c.algorithm.agent_opsd;
  if (a.clipLow > a.clipHigh) ctx.addIssue({ code: 'custom', path: ['algorithm', 'agent_opsd', 'clipLow'], message: `must not exceed algorithm.agent_opsd.clipHigh (${a.clipHigh})`, input: a.clipLow });
  const d = c.algorithm.adrs;
  if (d.startIteration > d.endIteration) ctx.addIssue({ code: 'custom', path: ['algorithm', 'adrs', 'startIteration'], message: `must not exceed algorithm.adrs.endIteration (${d.endIteration})`, input: d.startIteration });
});

/** The schema's output: environment-dependent settings may still be unset. */
export type ParsedConfig = z.output<typeof TrainConfigSchema>;

type Fill<T, K extends keyof T> = Omit<T, K> & { [P in K]-?: Exclude<T[P], undefined> };

/** A configuration with every default applied: what the trainer runs. */
export interface TrainConfig extends Omit<ParsedConfig, 'rollout' | 'algorithm' | 'optim' | 'validation' | 'output'> {
  rollout: Fill<ParsedConfig['rollout'], 'tasksPerIteration' | 'maxTurns' | 'maxPromptTokens'>;
  algorithm: Omit<Fill<ParsedConfig['algorithm'], 'klCoef' | 'invalidPenalty'>, 'agent_opsd' | 'adrs'> & {
    agent_opsd: Fill<ParsedConfig['algorithm']['agent_opsd'], 'granularity'>;
    adrs: Fill<ParsedConfig['algorithm']['adrs'], 'adaptiveClip' | 'activeEntropy'>;
  };
  optim: Fill<ParsedConfig['optim'], 'miniBatchSize' | 'warmupRatio'>;
  validation: Fill<ParsedConfig['validation'], 'every' | 'tasks' | 'temperature'>;
  output: Fill<ParsedConfig['output'], 'runName'>;
}

/** Warmup iterations of a run of `iterations` (SFT: optimizer steps): optim.warmupIterations, else its warmupRatio share. */
export function warmupIterations(optim: TrainConfig['optim'], iterations: number): number {
  return optim.warmupIterations ?? Math.round(optim.warmupRatio * iterations);
}

/** Fills the environment-dependent defaults left unset. */
export function resolveConfig(c: ParsedConfig): TrainConfig {
  const d = ENV_DEFAULTS[c.env.name];
  return {
    ...c,
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
      agent_opsd: { ...c.algorithm.agent_opsd, granularity: c.algorithm.agent_opsd.granularity ?? d.agentOpsdGranularity },
      adrs: {
        ...c.algorithm.adrs,
        adaptiveClip: c.algorithm.adrs.adaptiveClip ?? d.adrsAdaptiveClip,
        activeEntropy: c.algorithm.adrs.activeEntropy ?? d.adrsActiveEntropy,
      },
    },
    optim: { ...c.optim, miniBatchSize: c.optim.miniBatchSize ?? d.miniBatchSize, warmupRatio: c.optim.warmupRatio ?? d.warmupRatio },
    validation: {
      ...c.validation,
      every: c.validation.every ?? d.validationEvery,
      tasks: c.validation.tasks ?? d.validationTasks,
      temperature: c.validation.temperature ?? d.validationTemperature,
    },
    output: { ...c.output, runName: c.output.runName ?? `${c.env.name}-${c.method}-s${c.seed}` },
  };
}
