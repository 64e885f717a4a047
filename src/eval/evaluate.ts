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

import { isSplit, SERVER_SPLITS, SPLITS, type Environment, type ServerSplit, type Split, type TaskSplit } from '../envs/types.ts';
import { loraParameters } from '../lora/lora.ts';
import { loadTokenizer } from '../tokenizer/tokenizer.ts';
import { runRollout, type RolloutTask } from '../rollout/agent_loop.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { DEFAULT_SERVER_WAIT_SECONDS, ServerPool } from '../fleet/server_pool.ts';
import { probeIds } from '../fleet/weight_probe.ts';
import { readModelConfig } from '../hf_model/checkpoint.ts';
import { decodeCopiesHeld, DEFAULT_MEMORY_GIB, GIB, planMemory, rolloutBatching } from '../memory/memory_plan.ts';
import { currentRuntime, runtime } from '../gpu/runtime.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import { ConfigError, ENV_NAMES, envOptionsOf, serverTaskSet, validateConfig, type EnvName, type TrainConfig } from '../config/config.ts';
import { checkEnvFailures, countEnvFailures } from '../rollout/env_failures.ts';
import { agentSpec, makeEnvironment } from '../envs/environment.ts';
import { playsServerTasks, serverPanel, taskPanel } from './tasks.ts';
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
  /** An environment server (default: the run's env.url when the run's environment is evaluated, else the built-in environment). */
  envUrl?: string;
  /** The server is AgentGym's (default: the run's env.agentgym, else false). */
  agentgym?: boolean;
  /** Settings laid over the environment's env.<name> block (search: its question files and retriever); a key set to undefined is unset. */
  envOptions?: Record<string, unknown>;
  /** S: runs of every task (default 8). */
  seeds?: number;
  /** Panel size (default: the configuration's validation.tasks; on an AgentGym server or a search dataset, every task of the split). */
  tasks?: number;
  /** Default: the configuration's validation.split; on an AgentGym server, test (train, validation or test). */
  split?: TaskSplit;
  /** Environment seed of the panel's first task (default: the configuration's validation.seed); not on an AgentGym server, whose tasks are its indices. */
  panelSeed?: number;
  /** Default 0.4; 0 is greedy. */
  temperature?: number;
  /** Default: the configuration's rollout.maxTurns. */
  maxTurns?: number;
  /** Default: the configuration's rollout.maxResponseTokens. */
  maxResponseTokens?: number;
  /** Base of the sampling seeds (default: the panel seed, as validation does; on an AgentGym server, validation.seed). */
  samplingSeed?: number;
  /** Episodes the engine decodes together (default: the configuration's rollout.maxBatch); speed only, a seed's episode is the same in any batch. */
  maxBatch?: number;
  /** The GPU memory budget in bytes (default: the configuration's gpu.memory, else 4 GiB): the batch is narrowed to fit it, and the buffer pool holds no more. */
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
  /**
   * Evaluate what inference servers serve instead of running the model here (MODEL
   * still gives the tokenizer and the run's settings): their base URLs, the served
   * model or adapter to ask for (default: the base model), an API key, and how long
   * to wait for a server that does not answer (unset: 300 s, and one that refuses
   * connections at the start stops the evaluation at once).
   */
  server?: { urls: string[]; model?: string; apiKey?: string; waitSeconds?: number };
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
  /** The servers that generated, and the model they were asked for; null when the model ran here. */
  server: { urls: string[]; model: string } | null;
  env: EnvName;
  /** The environment server (or servers), when not the built-in environment, and whether it is AgentGym's. */
  envUrl: string | string[] | null;
  agentgym: boolean;
  split: TaskSplit;
  /** Null on an AgentGym server: the tasks are the set's first indices. */
  panelSeed: number | null;
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
  const splits: readonly string[] = [...SPLITS, ...SERVER_SPLITS];
  if (o.split !== undefined && !splits.includes(o.split)) throw new EvalError(`split: expected one of ${[...new Set(splits)].join(', ')}, got ${JSON.stringify(o.split)}`);
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

/**
 * The settings evaluation starts from: the run's configuration when the model comes
 * from a run of the same environment (its server included), with the environment
 * server the options name instead.
 */
function baseConfig(runConfig: TrainConfig | null, o: EvalOptions): TrainConfig {
  const base = runConfig && (o.env === undefined || o.env === runConfig.env.name) ? runConfig : validateConfig({ env: { name: o.env ?? 'household' } });
  if (o.envUrl === undefined && o.agentgym === undefined && o.envOptions === undefined) return base;
  const env: Record<string, unknown> = { ...base.env, url: o.envUrl ?? base.env.url, agentgym: o.agentgym ?? base.env.agentgym };
  // A run's AgentGym task sets mean nothing to another kind of server.
  if (!env.agentgym) env.tasks = {};
  if (o.envOptions) env[base.env.name] = overlay(envOptionsOf(base), o.envOptions);
  try {
    return validateConfig({ ...base, env });
  } catch (e) {
    if (e instanceof ConfigError) throw new EvalError(`the environment (envUrl, agentgym, envOptions): ${e.message}`);
    throw e;
  }
}

const isPlainObject = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);

/** `over` laid over `base`, nested objects merged, keys set to undefined removed. */
function overlay(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) delete out[k];
    else out[k] = isPlainObject(v) && isPlainObject(out[k]) ? overlay(out[k], v) : v;
  }
  return out;
}

/** The panel: the first tasks of an AgentGym server's set, or `tasks` seeded tasks of a built-in split (by default all of a split that is a finite set). */
async function evalPanel(cfg: TrainConfig, o: EvalOptions, env: Environment): Promise<{ split: TaskSplit; panelSeed: number | null; tasks: RolloutTask[] }> {
  if (playsServerTasks(cfg)) {
    const split = o.split ?? 'test';
    if (isSplit(split) && split !== 'train') throw new EvalError(`split: an AgentGym server's task sets are ${SERVER_SPLITS.join(', ')} (env.tasks), got ${split}`);
    if (o.panelSeed !== undefined) throw new EvalError('panelSeed: an AgentGym server\'s tasks are its own indices; choose them with split and tasks (the set\'s first ones) or env.tasks');
    const set = serverTaskSet(cfg.env, split as ServerSplit)!;
    if (o.tasks !== undefined && o.tasks > set.length) throw new EvalError(`tasks: the ${split} set of the server has ${set.length} tasks, not ${o.tasks}`);
    return { split, panelSeed: null, tasks: serverPanel(cfg, split as ServerSplit, o.tasks) };
  }
  const split = o.split ?? (cfg.validation.split as Split);
  if (!isSplit(split)) throw new EvalError(`split: ${split} is a task set of AgentGym servers; ${cfg.env.name} has ${SPLITS.join(', ')}`);
  const panelSeed = o.panelSeed ?? cfg.validation.seed;
  const count = o.tasks ?? (await env.taskCount?.(split)) ?? cfg.validation.tasks;
  return { split, panelSeed, tasks: taskPanel(split, panelSeed, count) };
}

function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, JSON.stringify(value, null, 2) + '\n');
}

export async function evaluate(o: EvalOptions): Promise<EvalReport> {
  checkOptions(o);
  const log = o.log ?? ((l: string) => console.log(l));
  const source = resolveModelSource(o.model);
  if (source.runConfigProblem) log(`note: not using the run's configuration (${source.runConfigProblem})`);
  const cfg = baseConfig(source.runConfig, o);
  const seeds = o.seeds ?? EVAL_DEFAULTS.seeds;
  const ks = [...(o.ks ?? EVAL_DEFAULTS.ks.filter((k) => k <= seeds))];
  const env = makeEnvironment(cfg, log);
  // A server that is down or of another kind, or a search dataset that cannot be read, fails here, before the model loads.
  await env.check?.();
  const panel = await evalPanel(cfg, o, env);
  const { split, panelSeed } = panel;
  const tasks = panel.tasks.length;
  const temperature = o.temperature ?? EVAL_DEFAULTS.temperature;
  const samplingSeed = o.samplingSeed ?? panelSeed ?? cfg.validation.seed;
  const maxTurns = o.maxTurns ?? cfg.rollout.maxTurns;
  const maxResponseTokens = o.maxResponseTokens ?? cfg.rollout.maxResponseTokens;
  const skills = o.skills ?? 'none';
  if (temperature === 0 && seeds > 1) log(`note: temperature 0 is greedy, so the ${seeds} seeds run identical episodes (std 0, pass@k = pass@1)`);

  const tokenizer = await loadTokenizer(source.tokenizerDir);
  const pool = o.server ? new ServerPool({
    role: 'eval', settingNames: { model: '--served-model', apiKey: 'an API key' }, urls: o.server.urls, model: o.server.model, versions: null, apiKey: o.server.apiKey,
    waitSeconds: o.server.waitSeconds ?? DEFAULT_SERVER_WAIT_SECONDS, waitSetting: '--server-wait', waitForRefused: o.server.waitSeconds !== undefined, waitForAll: false,
    probeTolerance: Infinity, probeIds: probeIds(tokenizer), log,
  }) : null;
  // Servers that are down or serve another vocabulary fail here, before anything runs.
  await pool?.preflight({ tokenizer });
  // Planned from config.json, before the weights are on the GPU: a batch that cannot fit is refused first.
  const memory = pool ? null : planMemory({
    model: readModelConfig(source.weights.kind === 'full' ? source.weights.dir : source.weights.basePath), trains: 'none', referenceCopy: false,
    microBatchTokens: 1, checkpointing: 'off', rolloutRows: o.maxBatch ?? cfg.rollout.maxBatch, rowTokens: cfg.rollout.maxPromptTokens + maxResponseTokens,
    budgetBytes: o.memoryBytes ?? (cfg.gpu.memory ?? DEFAULT_MEMORY_GIB) * GIB, decodeCopies: decodeCopiesHeld(currentRuntime()),
  });
  const model = pool ? null : loadModelSource(source);
  try {
    const described = pool
      ? `${pool.name} (${o.server!.model ?? pool.servers[0].baseName}; tokenizer and settings from ${source.input})`
      : source.checkpoint ? `${source.input} (checkpoint ${source.checkpoint}, iteration ${source.iteration})` : source.input;
    const where = cfg.env.url ? ` (${cfg.env.agentgym ? 'AgentGym ' : ''}server ${cfg.env.url})` : '';
    const which = panelSeed === null ? `tasks ${panel.tasks[0].seed}..${panel.tasks[tasks - 1].seed} of the server's ${split} set` : `seeds ${panelSeed}..${panelSeed + tasks - 1}`;
    log(`evaluating ${described} on ${cfg.env.name}${where} ${split}: ${tasks} tasks (${which}) x ${seeds} runs, temperature ${temperature}, at most ${maxTurns} turns of ${maxResponseTokens} tokens${SKILLS_NOTE[skills]}`);
    const context = pool?.contextLength;
    if (context !== undefined && context - maxResponseTokens < 1) {
      throw new EvalError(`maxResponseTokens: ${maxResponseTokens} response tokens leave no room for a prompt in the server's context (max_model_len ${context})`);
    }
    if (context !== undefined && context < cfg.rollout.maxPromptTokens + maxResponseTokens) {
      log(`note: the server's context (max_model_len ${context}) cuts prompts to ${context - maxResponseTokens} tokens (rollout.maxPromptTokens ${cfg.rollout.maxPromptTokens} + ${maxResponseTokens} response tokens do not fit)`);
    }
    let engine;
    if (pool) {
      engine = pool;
    } else {
      runtime().pool.limit = memory!.budgetBytes;
      for (const note of memory!.notes) log(`memory: ${note}`);
      engine = new LocalEngine(model!, { tokenizer, name: 'eval', path: source.input, ...rolloutBatching(memory!) });
    }
    const progress = new Progress(process.stdout, o.progress ?? 'auto');
    const phase = progress.phase('eval', tasks * seeds);
    const trajectoryLog = o.trajectories ? new TrajectoryLog(o.trajectories) : undefined;
    const started = performance.now();
    let result;
    try {
      result = await runRollout({
        env,
        spec: agentSpec(cfg),
        engine,
        tokenizer,
        thinking: cfg.model.thinking,
        tasks: panel.tasks,
        groupSize: seeds,
        sampling: { temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed: samplingSeed },
        maxPromptTokens: cfg.rollout.maxPromptTokens,
        maxResponseTokens,
        maxTurns,
        stopAfterAction: cfg.rollout.stopAfterAction,
        history: cfg.rollout.history,
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
    // Failures past env.maxFailedShare would bias every statistic: the evaluation stops instead.
    checkEnvFailures(countEnvFailures(result.trajectories), cfg.env.maxFailedShare, 'evaluation');
    if (failed.length) log(`warning: ${failed.length} of ${result.trajectories.length} episodes failed in the environment and are left out (first: ${failed[0].error})`);

    const report: EvalReport = {
      model: {
        input: source.input, kind: source.kind, checkpoint: source.checkpoint, iteration: source.iteration,
        weights: source.weights.kind === 'full' ? source.weights.dir : source.weights.basePath,
        adapter: source.weights.kind === 'lora' ? source.weights.adapterDir : null,
      },
      server: pool ? { urls: pool.servers.map((x) => x.url), model: o.server!.model ?? pool.servers[0].baseName! } : null,
      env: cfg.env.name, envUrl: cfg.env.url ?? null, agentgym: cfg.env.agentgym, split, panelSeed, tasks, seeds, temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, samplingSeed,
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
    if (model) for (const p of [...model.parameters(), ...loraParameters(model)]) p.dispose();
  }
}
