// The RL training run of every method: build the model, engine, environment and
// teacher from a validated config, then iterate rollout -> advantages -> update as
// the method's plan says (methods.ts), validating on a fixed seeded panel, logging
// metrics and trajectories, and checkpointing (resumable: the same seeds give the
// same run whether or not it was interrupted). SFT has its own loop (sft_run.ts);
// RetireOPD without a teacher checkpoint chains two runs (retire_opd.ts).

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Split } from '../envs/types.ts';
import { loadCausalLM } from '../models/load.ts';
import { attachLora, loadLora } from '../models/lora.ts';
import { loadTokenizer, type Tokenizer } from '../models/tokenizer.ts';
import { AdamW } from '../optim/adamw.ts';
import { lrAt } from '../optim/schedule.ts';
import { agentSpec } from '../rollout/agent_spec.ts';
import { runRollout, type RolloutOptions, type RolloutTask } from '../rollout/agent_loop.ts';
import type { Engine } from '../rollout/engine.ts';
import { HttpEngine } from '../rollout/http_engine.ts';
import { LocalEngine } from '../rollout/local_engine.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import { assertResumable, findLatestCheckpoint, loadCheckpoint, saveCheckpoint } from './checkpoint.ts';
import { assertImplemented, configHash, runDir as runDirOf, warmupIterations, writeRunConfig, type TrainConfig } from './config.ts';
import { trainingIteration, type Reference } from './iteration.ts';
import { scoringTemperature } from './update.ts';
import { INTERPRETED_METHODS, planIteration, TRAIN_METHODS, type MethodState } from './methods.ts';
import { isTeacherDir, loadTeacher, recordRetirementGap, retirementDue, stageOneConfig, stageOneDone, stageTwoConfig, type RetireState } from './retire_opd.ts';
import type { TeacherSource } from './teacher.ts';
import { MetricsLogger, rolloutMetrics, summaryLine, type Metrics } from './metrics.ts';
import { Progress } from './progress.ts';
import { writeReport } from './report.ts';
import { RemoteWeights } from './weight_sync.ts';
import { Rng } from './rng.ts';
import { runtime } from '../gpu/runtime.ts';
import { runSft } from './sft_run.ts';
import { trainableParams } from './trainable.ts';
import { makeEnvironment, taskPanel } from './environment.ts';

export interface TrainOptions {
  /** Continue the run in the output directory from its latest checkpoint. */
  resume?: boolean;
  /** Replace an existing run's metrics instead of refusing. */
  overwrite?: boolean;
  /** Stop after this many iterations in this invocation (time-boxed jobs); `resume` continues. */
  stopAfter?: number;
  /** Stop (with a checkpoint) before an iteration that would likely end after this many seconds from the start; `resume` continues. */
  timeLimitSeconds?: number;
  log?: (line: string) => void;
}

export interface TrainResult {
  runDir: string;
  iterations: number;
  lastMetrics: Metrics;
}

/** The seeds of the task splits are drawn in [0, 1e9) (the environments' seed range). */
const SEED_RANGE = 1_000_000_000;

/** Checks what the config names on disk, so a typo fails before any GPU work. */
export function checkRunInputs(cfg: TrainConfig): void {
  assertImplemented(cfg.method, TRAIN_METHODS);
  const model = cfg.model.path;
  if (!fs.existsSync(path.join(model, 'config.json'))) {
    throw new Error(`model.path: ${model} is not a Hugging Face checkpoint directory (no config.json)${model === 'models/household-tiny' ? '; make it with `bun run cli make-default-model`' : ''}`);
  }
  if (!fs.existsSync(path.join(model, 'tokenizer.json'))) throw new Error(`model.path: ${model} has no tokenizer.json`);
  if (cfg.rollout.engine === 'http') requireServedModel(cfg);
  const teacher = cfg.algorithm.retire_opd.teacherPath;
  if (cfg.method === 'retire_opd' && teacher && !isTeacherDir(teacher)) {
    throw new Error(`algorithm.retire_opd.teacherPath: ${teacher} is neither a Hugging Face model directory (config.json) nor a training checkpoint (checkpoint.json)`);
  }
}

function requireServedModel(cfg: TrainConfig): string {
  if (!cfg.rollout.model) throw new Error('rollout.model: required with rollout.engine http (the model name the server serves)');
  return cfg.rollout.model;
}

/** RetireOPD with no teacher yet: stage 1 (Skill-GRPO) makes one, stage 2 distils from it; --resume continues either. */
async function trainRetireOpd(cfg: TrainConfig, opts: TrainOptions): Promise<TrainResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const one = stageOneConfig(cfg);
  const oneDir = runDirOf(one);
  if (opts.resume && stageOneDone(one)) {
    log(`retire_opd: stage 1 already complete in ${oneDir}`);
  } else {
    log(`retire_opd stage 1: the skill-conditioned teacher (Skill-GRPO, ${one.iterations} iterations) in ${oneDir}`);
    const r = await train(one, { ...opts, resume: opts.resume && findLatestCheckpoint(path.join(oneDir, 'checkpoints')) !== null });
    if (r.iterations < one.iterations) return r;
  }
  const two = stageTwoConfig(cfg, oneDir);
  log(`retire_opd stage 2: the skill-free student, distilled from ${two.algorithm.retire_opd.teacherPath}`);
  const resumeTwo = opts.resume && findLatestCheckpoint(path.join(runDirOf(two), 'checkpoints')) !== null;
  return train(two, { ...opts, resume: resumeTwo });
}

export async function train(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  checkRunInputs(cfg);
  if (cfg.method === 'sft') return runSft(cfg, opts);
  if (cfg.method === 'retire_opd' && !cfg.algorithm.retire_opd.teacherPath) return trainRetireOpd(cfg, opts);
  const log = opts.log ?? ((l: string) => console.log(l));
  const dir = runDirOf(cfg);
  const ckptRoot = path.join(dir, 'checkpoints');
  const hash = configHash(cfg);
  const resumeFrom = opts.resume ? findLatestCheckpoint(ckptRoot) : null;
  if (opts.resume && !resumeFrom) throw new Error(`--resume: no checkpoint under ${ckptRoot}`);
  const ckpt = resumeFrom ? loadCheckpoint(resumeFrom) : null;
  if (ckpt) assertResumable(ckpt.trainerState, hash, resumeFrom!);

  const lora = cfg.model.lora;
  const modelPath = ckpt?.model.kind === 'full' ? ckpt.model.dir : cfg.model.path;
  const model = loadCausalLM(modelPath, { trainable: !lora });
  if (lora) {
    if (ckpt?.model.kind === 'lora') loadLora(model, ckpt.model.adapterDir);
    else attachLora(model, { r: lora.r, alpha: lora.alpha, targetModules: lora.targetModules, useRslora: lora.useRslora, baseModel: cfg.model.path }, cfg.seed);
  }
  const tokenizer: Tokenizer = await loadTokenizer(cfg.model.path);
  const params = trainableParams(model, cfg);
  const optimizer = new AdamW(params, { lr: cfg.optim.lr, betas: cfg.optim.betas, eps: cfg.optim.eps, weightDecay: cfg.optim.weightDecay });
  if (ckpt) optimizer.loadStateDict(ckpt.optimizerState);

  const reference: Reference = cfg.algorithm.klCoef <= 0 ? { kind: 'none' } : lora ? { kind: 'lora-base' } : { kind: 'model', model: loadCausalLM(cfg.model.path, { trainable: false }) };
  const engine: Engine = cfg.rollout.engine === 'local'
    ? new LocalEngine(model as never, { tokenizer, name: 'policy', path: modelPath, maxBatch: cfg.rollout.maxBatch })
    : new HttpEngine({ baseUrl: cfg.rollout.url!, model: requireServedModel(cfg) });
  const remote = engine instanceof HttpEngine ? new RemoteWeights(engine, path.join(dir, 'sync'), !!lora) : null;
  const env = makeEnvironment(cfg);
  const spec = agentSpec(cfg.env.name);
  const teacherPath = cfg.method === 'retire_opd' ? cfg.algorithm.retire_opd.teacherPath : undefined;
  const frozenTeacher = teacherPath ? loadTeacher(teacherPath) : null;
  const teacher: TeacherSource | undefined = frozenTeacher
    ? { kind: 'model', model: frozenTeacher }
    : cfg.teacher.engine === 'http'
      ? { kind: 'engine', engine: new HttpEngine({ baseUrl: cfg.teacher.url!, model: cfg.teacher.model ?? remote?.modelName ?? requireServedModel(cfg) }), model: cfg.teacher.model }
      : undefined;

  const rng = ckpt ? Rng.fromState(ckpt.trainerState.rng.tasks) : Rng.seeded(cfg.seed, 'tasks');
  const start = ckpt?.trainerState.iteration ?? 0;
  const methodState: MethodState = { distillRetired: false };
  let retire: RetireState | null = cfg.method === 'retire_opd' ? { teacherSuccess: null, gaps: [], pendingGaps: [], retiredAt: null } : null;
  if (ckpt && retire) retire = ckpt.trainerState.retire as RetireState;
  if (retire) methodState.distillRetired = retire.retiredAt !== null;
  fs.mkdirSync(dir, { recursive: true });
  writeRunConfig(dir, cfg);
  const metrics = new MetricsLogger(dir, { tensorboard: cfg.output.tensorboard, resumeFrom: ckpt ? start : undefined, overwrite: opts.overwrite });
  const progress = new Progress(process.stdout, cfg.output.progress);
  if (ckpt) log(`resuming ${dir} after iteration ${start} (${resumeFrom})`);
  log(`training ${cfg.method} on ${cfg.env.name} from ${cfg.model.path}${lora ? ` with LoRA r=${lora.r}` : ''}: ${cfg.iterations} iterations of ${cfg.rollout.tasksPerIteration} tasks x ${cfg.rollout.groupSize}; run directory ${dir}`);
  const interpreted = INTERPRETED_METHODS[cfg.method];
  if (interpreted) log(`note: ${interpreted}`);
  if (teacherPath) log(`teacher: frozen ${teacherPath} with the skills block`);

  const rolloutBase = (tasks: RolloutTask[], groupSize: number, temperature: number, seed: number, label: string, trajectoryLog?: TrajectoryLog, rolloutEngine: Engine = engine): RolloutOptions => {
    const phase = progress.phase(label, tasks.length * groupSize);
    return {
      env, spec, engine: rolloutEngine, tokenizer, tasks, groupSize, model: rolloutEngine === engine ? remote?.modelName : undefined,
      sampling: { temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed },
      maxPromptTokens: cfg.rollout.maxPromptTokens,
      maxResponseTokens: cfg.rollout.maxResponseTokens,
      maxTurns: cfg.rollout.maxTurns,
      invalidPenalty: cfg.algorithm.invalidPenalty,
      stopAfterAction: cfg.rollout.stopAfterAction,
      teacherSkillsPlacement: cfg.teacher.skillsPlacement,
      concurrency: cfg.rollout.concurrency,
      envTimeoutMs: cfg.env.timeoutMs,
      trajectoryLog,
      onProgress: (p) => (p.completed + p.failed >= p.total ? phase.finish(`${p.turns} turns`) : phase.update(p.completed + p.failed, `${p.turns} turns, ${p.tokensGenerated} tokens`)),
    };
  };
  const validationPanel = taskPanel(cfg.validation.split as Split, cfg.validation.seed, cfg.validation.tasks);
  const rolloutsDir = path.join(dir, 'rollouts');
  /** One pass over the panel; trajectories go to rollouts/<stem>-<iteration>.jsonl. */
  const validationRun = async (iteration: number, skills: 'none' | 'policy', stem: string, rolloutEngine: Engine = engine, label = 'validation') => {
    const file = cfg.output.trajectories ? path.join(rolloutsDir, `${stem}-${iteration}.jsonl`) : null;
    // A resumed run may repeat a validation the interrupted one had started.
    if (file) fs.rmSync(file, { force: true });
    const trajectoryLog = file ? new TrajectoryLog(file) : undefined;
    try {
      return await runRollout({ ...rolloutBase(validationPanel, cfg.validation.runs, cfg.validation.temperature, cfg.validation.seed, label, trajectoryLog, rolloutEngine), groupIdPrefix: `val${iteration}-`, withSkills: skills });
    } finally {
      trajectoryLog?.close();
    }
  };
  // Methods whose policy prompts carry the skills block validate with it and without it.
  const validate = async (iteration: number): Promise<Metrics> => {
    const own = planIteration(cfg, Math.max(iteration, 1), methodState).skills === 'policy';
    const m = rolloutMetrics((await validationRun(iteration, own ? 'policy' : 'none', 'val')).stats, 'val');
    if (own) Object.assign(m, rolloutMetrics((await validationRun(iteration, 'none', 'val-noskills')).stats, 'val_noskills'));
    return m;
  };
  const isDue = (every: number, it: number) => it === cfg.iterations || (every > 0 && it % every === 0);

  // The server starts from the base weights; a resumed or LoRA run sends its own first.
  if (remote && (ckpt || lora)) await remote.push(model, start);
  let last: Metrics = {};
  if (retire && frozenTeacher && retire.teacherSuccess === null) {
    const teacherEngine = new LocalEngine(frozenTeacher as never, { tokenizer, name: 'teacher', path: teacherPath! });
    retire.teacherSuccess = (await validationRun(0, 'policy', 'teacher-val', teacherEngine, 'teacher validation')).stats.successRate;
    log(`retire_opd: the teacher (with skills) succeeds on ${(retire.teacherSuccess * 100).toFixed(1)}% of the validation panel`);
  }
  if (!ckpt && cfg.validation.atStart) {
    last = await validate(0);
    if (retire?.teacherSuccess !== null && retire) last['retire/teacher_success'] = retire.teacherSuccess;
    metrics.log(0, last);
    log(summaryLine(0, cfg.iterations, last));
  }
  let end = Math.min(cfg.iterations, opts.stopAfter !== undefined ? start + opts.stopAfter : cfg.iterations);
  const startedAt = performance.now();
  let slowest = 0;
  for (let it = start + 1; it <= end; it++) {
    const iterationStart = performance.now();
    const tasks: RolloutTask[] = Array.from({ length: cfg.rollout.tasksPerIteration }, () => ({ split: cfg.env.trainSplit as Split, seed: rng.nextU32() % SEED_RANGE }));
    const engineSeed = rng.nextU32();
    const trajectoryLog = cfg.output.trajectories ? new TrajectoryLog(path.join(rolloutsDir, `iter-${it}.jsonl`)) : undefined;
    const lr = lrAt(it - 1, { base: cfg.optim.lr, warmupSteps: warmupIterations(cfg.optim, cfg.iterations), kind: cfg.optim.schedule, totalSteps: cfg.iterations, minLr: cfg.optim.minLr });
    const shuffleRng = Rng.seeded(engineSeed, 'shuffle');
    const plan = planIteration(cfg, it, methodState);
    const a = cfg.algorithm;
    const result = await trainingIteration({
      rollout: { ...rolloutBase(tasks, cfg.rollout.groupSize, cfg.rollout.temperature, engineSeed, `rollout ${it}`, trajectoryLog), groupIdPrefix: `it${it}-` },
      update: {
        model, optimizer, params, lr,
        loss: { clipLow: a.clipLow, clipHigh: a.clipHigh, dualClip: a.dualClip, klCoef: a.klCoef, entropyCoef: plan.entropyCoef, policyGradient: plan.policyGradient },
        gradClip: cfg.optim.gradClip > 0 ? cfg.optim.gradClip : Infinity,
        miniBatchSize: cfg.optim.miniBatchSize,
        microBatchTokens: cfg.optim.microBatchTokens,
        temperature: scoringTemperature(cfg.rollout.temperature),
        shuffle: (n) => shuffleRng.shuffle(Array.from({ length: n }, (_, i) => i)),
      },
      reference,
      plan,
      teacher,
    });
    trajectoryLog?.close();
    runtime().releaseCached();
    const syncStart = performance.now();
    if (remote && result.update) await remote.push(model, it);
    const t = result.times;
    const m: Metrics = {
      ...rolloutMetrics(result.rollout.stats, 'rollout'), ...result.metrics, 'actor/lr': lr,
      'time/old_logprobs': t.oldLogprobs, 'time/teacher': t.teacher, 'time/reference': t.reference, 'time/update': t.update,
    };
    if (remote) m['time/weight_sync'] = (performance.now() - syncStart) / 1000;
    if (result.update) {
      const u = result.update;
      Object.assign(m, {
        'actor/pg_loss': u.pgLoss, 'actor/kl': u.kl, 'actor/entropy': u.entropy, 'actor/clip_frac': u.clipFrac,
        'actor/grad_norm': u.gradNorm, 'actor/skipped_steps': u.skippedSteps, 'actor/steps': u.steps, 'tokens/trained': u.trainedTokens,
      });
    }
    const stepSeconds = t.rollout + t.oldLogprobs + t.teacher + t.reference + t.update;
    m['time/step'] = stepSeconds;
    m['time/teacher_share'] = t.teacher / Math.max(stepSeconds, 1e-9);
    m['throughput/tokens_per_s'] = (result.rollout.stats.tokensGenerated + (result.update?.trainedTokens ?? 0)) / Math.max(stepSeconds, 1e-9);
    if (retire && m['teacher/abs_gap'] !== undefined) recordRetirementGap(retire, m['teacher/abs_gap']);
    if (isDue(cfg.validation.every, it)) {
      Object.assign(m, await validate(it));
      if (retire && retirementDue(retire, m['val/success'], a.retire_opd, it)) {
        methodState.distillRetired = true;
        log(`retire_opd: distillation retired after iteration ${it} (gap stopped shrinking for ${a.retire_opd.window} validations; student ${(m['val/success'] * 100).toFixed(1)}% vs teacher ${((retire.teacherSuccess ?? 0) * 100).toFixed(1)}%)`);
      }
      if (retire) m['retire/retired'] = methodState.distillRetired ? 1 : 0;
    }
    metrics.log(it, m);
    log(summaryLine(it, cfg.iterations, m));
    last = m;
    slowest = Math.max(slowest, (performance.now() - iterationStart) / 1000);
    if (opts.timeLimitSeconds !== undefined && it < end && (performance.now() - startedAt) / 1000 + slowest > opts.timeLimitSeconds) end = it;
    // An invocation that stops early always saves, so --resume loses nothing.
    if (isDue(cfg.checkpoint.every, it) || it === end) {
      const where = await saveCheckpoint(ckptRoot, {
        model: lora ? { kind: 'lora', model: model as never, basePath: cfg.model.path } : { kind: 'full', model: model as never, tokenizerDir: cfg.model.path },
        optimizerState: await optimizer.stateDict(),
        trainerState: { iteration: it, configHash: hash, rng: { tasks: rng.state() }, metrics: m, ...(retire ? { retire } : {}) },
      }, { keepLast: cfg.checkpoint.keepLast });
      log(`checkpoint ${where}`);
    }
  }
  metrics.close();
  const report = writeReport(dir);
  log(`report ${report}`);
  if (end < cfg.iterations) log(`stopped after iteration ${end} of ${cfg.iterations}; continue with --resume`);
  return { runDir: dir, iterations: end, lastMetrics: last };
}
