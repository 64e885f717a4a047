// Standalone evaluation of a model (docs/ALGORITHMS.md section 4): a fixed
// seeded panel of tasks, each run S times, success mean ± std (n - 1) over the S
// seeds, unbiased pass@k per task averaged over tasks, the same per task type, and
// shop's native score.
//
// The S runs of a task are one group of the agent loop (one batched rollout for the
// whole evaluation): seed index s is run s of each task's group, and its per-turn
// sampling seeds derive from (samplingSeed, task, s, turn). With S = 1 and the run's
// validation temperature this is exactly the trainer's validation pass. Temperature
// defaults to 0.4 (the RL recipes' validation temperature) for every environment, even
// search, whose training validates greedily: greedy runs are identical across seeds.

import type { Split } from '../envs/types.ts';
import { loraParameters } from '../models/lora.ts';
import { loadTokenizer } from '../models/tokenizer.ts';
import { runRollout } from '../rollout/agent_loop.ts';
import { LocalEngine } from '../rollout/local_engine.ts';
import { DEFAULT_MEMORY_GIB, GIB, planMemory } from '../models/memory_plan.ts';
import { runtime } from '../gpu/runtime.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import { envPlugin } from '../../envs/registry.ts';
import { ENV_NAMES, validateConfig, type EnvName, type TrainConfig } from '../config/config.ts';
import { makeEnvironment, taskPanel } from './environment.ts';
import { summarizeEval, type EpisodeOutcome, type EvalSummary } from '../report/eval_stats.ts';
import { loadModelSource, resolveModelSource } from '../checkpoint/model_source.ts';
import { Progress, type ProgressMode } from '../report/progress.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';

export const EVAL_DEFAULTS = { seeds: 8, temperature: 0.4, ks: [1, 2, 4, 8] } as const;

/** Bad evaluation settings; the message names the option. */
export class EvalError extends Error {
  override name = 'EvalError';
}

export type EvalSkills = 'none' | 'prompt' | 'teacher';

const SKILLS_NOTE: Record<EvalSkills, string> = {
  none: '',
  prompt: ', with the skills block in its own prompt',
  teacher: ', reading the teacher\'s prompt (the skills block as the self-distillation methods place it)',
};

export interface EvalOptions {
  /** A Hugging Face model directory, a training checkpoint, or a run directory (its latest checkpoint). */
  model: string;
  /** Default: the run's environment, else household. */
  env?: EnvName;
  /** S: runs of every task (default 8). */
  seeds?: number;
  /** Panel size (default: the configuration's validation.tasks). */
  tasks?: number;
  /** Default: the configuration's validation.split. */
  split?: Split;
  /** Environment seed of the panel's first task (default: the configuration's validation.seed). */
  panelSeed?: number;
  /** Default 0.4; 0 is greedy. */
  temperature?: number;
  /** Default: the configuration's rollout.maxTurns. */
  maxTurns?: number;
  /** Default: the configuration's rollout.maxResponseTokens. */
  maxResponseTokens?: number;
  /** Base of the sampling seeds (default: the panel seed, as validation does). */
  samplingSeed?: number;
  /** Episodes the engine decodes together (default: the configuration's rollout.maxBatch); speed only, a seed's episode is the same in any batch. */
  maxBatch?: number;
  /** The GPU memory budget in bytes (default 4 GiB): the batch is narrowed to fit it, and the buffer pool never holds more. */
  memoryBytes?: number;
  /** pass@k for these k (default 1, 2, 4, 8 up to S); every k must be <= S. */
  ks?: readonly number[];
  /**
   * The skills block in what the model reads (how much the privileged context helps
   * it): `prompt` in its own user message as Skill-GRPO routes the cards, `teacher` as
   * the teacher's prompt of the self-distillation methods (teacher.skillsPlacement, the
   * teacher's cards). Default none.
   */
  skills?: EvalSkills;
  /** JSON report file (written atomically). */
  out?: string;
  /** Every trajectory as JSONL. */
  trajectories?: string;
  progress?: ProgressMode;
  log?: (line: string) => void;
}

/** One episode: its outcome plus what it cost. */
export interface EvalEpisode extends EpisodeOutcome {
  split: string;
  /** The task's environment seed. */
  taskSeed: number;
  episodeReturn: number;
  turns: number;
  invalidTurns: number;
  truncated: boolean;
}

export interface EvalReport {
  model: { input: string; kind: 'model' | 'checkpoint' | 'run'; checkpoint: string | null; iteration: number | null; weights: string; adapter: string | null };
  env: EnvName;
  split: Split;
  panelSeed: number;
  tasks: number;
  seeds: number;
  temperature: number;
  topP: number;
  topK: number;
  samplingSeed: number;
  maxTurns: number;
  maxPromptTokens: number;
  maxResponseTokens: number;
  /** Where the skills block was in what the model read. */
  skills: EvalSkills;
  ks: number[];
  summary: EvalSummary;
  /** Episodes that failed in the environment (server error, timeout): left out of every statistic. */
  failed: { taskId: string; seed: number; error: string }[];
  episodes: EvalEpisode[];
  tokensGenerated: number;
  wallSeconds: number;
  finishedAt: string;
}

function positiveInt(option: string, v: number | undefined, max = Infinity): void {
  if (v !== undefined && !(Number.isInteger(v) && v >= 1 && v <= max)) throw new EvalError(`${option}: expected an integer >= 1${max < Infinity ? ` and <= ${max}` : ''}, got ${v}`);
}

function checkOptions(o: EvalOptions): void {
  positiveInt('seeds', o.seeds);
  positiveInt('tasks', o.tasks);
  positiveInt('maxTurns', o.maxTurns);
  positiveInt('maxResponseTokens', o.maxResponseTokens);
  positiveInt('maxBatch', o.maxBatch);
  if (o.env !== undefined && !ENV_NAMES.includes(o.env)) throw new EvalError(`env: expected one of ${ENV_NAMES.join(', ')}, got ${JSON.stringify(o.env)}`);
  if (o.split !== undefined && !['train', 'valid_seen', 'valid_unseen'].includes(o.split)) throw new EvalError(`split: expected train, valid_seen or valid_unseen, got ${JSON.stringify(o.split)}`);
  for (const [option, v] of [['panelSeed', o.panelSeed], ['samplingSeed', o.samplingSeed]] as const) {
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 0)) throw new EvalError(`${option}: expected an integer >= 0, got ${v}`);
  }
  if (o.temperature !== undefined && !(Number.isFinite(o.temperature) && o.temperature >= 0)) throw new EvalError(`temperature: expected a number >= 0, got ${o.temperature}`);
  const seeds = o.seeds ?? EVAL_DEFAULTS.seeds;
  if (o.ks !== undefined) {
    if (o.ks.length === 0) throw new EvalError('ks: name at least one k');
    for (const k of o.ks) {
      if (!(Number.isInteger(k) && k >= 1)) throw new EvalError(`ks: expected integers >= 1, got ${k}`);
      if (k > seeds) throw new EvalError(`ks: pass@${k} needs at least ${k} runs per task, but seeds is ${seeds}`);
    }
  }
}

/** The settings evaluation starts from: the run's configuration when the model comes from a run of the same environment. */
function baseConfig(runConfig: TrainConfig | null, env: EnvName | undefined): TrainConfig {
  if (runConfig && (env === undefined || env === runConfig.env.name)) return runConfig;
  return validateConfig({ env: { name: env ?? 'household' } });
}

function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, JSON.stringify(value, null, 2) + '\n');
}

export async function evaluate(o: EvalOptions): Promise<EvalReport> {
  checkOptions(o);
  const log = o.log ?? ((l: string) => console.log(l));
  const source = resolveModelSource(o.model);
  if (source.runConfigProblem) log(`note: not using the run's configuration (${source.runConfigProblem})`);
  const cfg = baseConfig(source.runConfig, o.env);
  const seeds = o.seeds ?? EVAL_DEFAULTS.seeds;
  const ks = [...(o.ks ?? EVAL_DEFAULTS.ks.filter((k) => k <= seeds))];
  const split = o.split ?? (cfg.validation.split as Split);
  const panelSeed = o.panelSeed ?? cfg.validation.seed;
  const tasks = o.tasks ?? cfg.validation.tasks;
  const temperature = o.temperature ?? EVAL_DEFAULTS.temperature;
  const samplingSeed = o.samplingSeed ?? panelSeed;
  const maxTurns = o.maxTurns ?? cfg.rollout.maxTurns;
  const maxResponseTokens = o.maxResponseTokens ?? cfg.rollout.maxResponseTokens;
  const skills = o.skills ?? 'none';
  const env = makeEnvironment(cfg);
  if (temperature === 0 && seeds > 1) log(`note: temperature 0 is greedy, so the ${seeds} seeds run identical episodes (std 0, pass@k = pass@1)`);

  const model = loadModelSource(source);
  try {
    const tokenizer = await loadTokenizer(source.tokenizerDir);
    const described = source.checkpoint ? `${source.input} (checkpoint ${source.checkpoint}, iteration ${source.iteration})` : source.input;
    log(`evaluating ${described} on ${cfg.env.name} ${split}: ${tasks} tasks (seeds ${panelSeed}..${panelSeed + tasks - 1}) x ${seeds} runs, temperature ${temperature}, at most ${maxTurns} turns of ${maxResponseTokens} tokens${SKILLS_NOTE[skills]}`);
    const memory = planMemory({
      model: model.config, trains: 'none', referenceCopy: false, microBatchTokens: 1, checkpointing: 'off',
      rolloutRows: o.maxBatch ?? cfg.rollout.maxBatch, rowTokens: cfg.rollout.maxPromptTokens + maxResponseTokens,
      budgetBytes: o.memoryBytes ?? DEFAULT_MEMORY_GIB * GIB,
    });
    runtime().pool.limit = memory.budgetBytes;
    for (const note of memory.notes) log(`memory: ${note}`);
    const progress = new Progress(process.stdout, o.progress ?? 'auto');
    const phase = progress.phase('eval', tasks * seeds);
    const trajectoryLog = o.trajectories ? new TrajectoryLog(o.trajectories) : undefined;
    const started = performance.now();
    let result;
    try {
      result = await runRollout({
        env,
        spec: envPlugin(cfg.env.name).agent,
        engine: new LocalEngine(model, { tokenizer, name: 'eval', path: source.input, maxBatch: memory.rolloutRows, prefillTokens: memory.prefillTokens }),
        tokenizer,
        tasks: taskPanel(split, panelSeed, tasks),
        groupSize: seeds,
        sampling: { temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed: samplingSeed },
        maxPromptTokens: cfg.rollout.maxPromptTokens,
        maxResponseTokens,
        maxTurns,
        stopAfterAction: cfg.rollout.stopAfterAction,
        concurrency: cfg.rollout.concurrency,
        envTimeoutMs: cfg.env.timeoutMs,
        groupIdPrefix: 'eval-',
        withSkills: skills === 'prompt' ? 'policy' : skills === 'teacher' ? 'as_teacher' : 'none',
        teacherSkillsPlacement: cfg.teacher.skillsPlacement,
        trajectoryLog,
        onProgress: (p) => (p.completed + p.failed >= p.total ? phase.finish(`${p.turns} turns`) : phase.update(p.completed + p.failed, `${p.turns} turns, ${p.tokensGenerated} tokens`)),
      });
    } finally {
      trajectoryLog?.close();
    }

    const episodes: EvalEpisode[] = [];
    const failed: EvalReport['failed'] = [];
    result.trajectories.forEach((t, i) => {
      // Trajectories come in task order, `seeds` runs per task.
      const seed = i % seeds;
      const taskId = `${t.split}:${t.seed}`;
      if (t.error !== undefined) {
        failed.push({ taskId, seed, error: t.error });
        return;
      }
      const episode: EvalEpisode = {
        taskId, taskType: t.taskType, seed, won: t.won, split: t.split, taskSeed: t.seed, episodeReturn: t.episodeReturn,
        turns: t.turns.length, invalidTurns: t.turns.filter((u) => !u.valid).length, truncated: t.truncated,
      };
      if (t.envScore !== undefined) episode.score = t.envScore;
      episodes.push(episode);
    });
    if (failed.length) log(`warning: ${failed.length} of ${result.trajectories.length} episodes failed in the environment and are left out (first: ${failed[0].error})`);
    if (episodes.length === 0) throw new EvalError(`every one of the ${result.trajectories.length} episodes failed in the environment; nothing to evaluate`);

    const report: EvalReport = {
      model: {
        input: source.input, kind: source.kind, checkpoint: source.checkpoint, iteration: source.iteration,
        weights: source.weights.kind === 'full' ? source.weights.dir : source.weights.basePath,
        adapter: source.weights.kind === 'lora' ? source.weights.adapterDir : null,
      },
      env: cfg.env.name, split, panelSeed, tasks, seeds, temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, samplingSeed,
      maxTurns, maxPromptTokens: cfg.rollout.maxPromptTokens, maxResponseTokens, skills, ks,
      summary: summarizeEval(episodes, ks),
      failed, episodes,
      tokensGenerated: result.stats.tokensGenerated,
      wallSeconds: (performance.now() - started) / 1000,
      finishedAt: new Date().toISOString(),
    };
    if (o.out) writeJsonAtomic(o.out, report);
    return report;
  } finally {
    for (const p of [...model.parameters(), ...loraParameters(model)]) p.dispose();
  }
}
