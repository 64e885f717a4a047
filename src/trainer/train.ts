// The RL training run of every method: build the model, engine, environment and
// teacher from a validated config, then iterate rollout -> advantages -> update as
// the method's plan says (src/algos/methods/), validating on a fixed seeded panel,
// logging metrics and trajectories, and checkpointing (resumable: the same seeds give
// the same run whether or not it was interrupted). Methods trained by supervised
// fine-tuning have their own loop (sft_run.ts); a staged method runs its stages as
// chained runs.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { envPlugin } from '../../envs/registry.ts';
import type { Stage } from '../algos/method.ts';
import { methodDefinition } from '../algos/methods/index.ts';
import { runtime } from '../gpu/runtime.ts';
import { zeroGrad } from '../tensor/autograd.ts';
import { PhaseMemory } from '../gpu/phase_memory.ts';
import { applyMemoryPlan, trainingMemoryPlan } from '../run/memory.ts';
import { rolloutBatching } from '../memory/memory_plan.ts';
import { checkModelContext } from '../run/model_context.ts';
import { loadCausalLM } from '../models/load.ts';
import { attachLora, loadLora, loraParameters } from '../lora/lora.ts';
import { loadTokenizer, type Tokenizer } from '../tokenizer/tokenizer.ts';
import { AdamW } from '../optim/adamw.ts';
import { lrAt } from '../optim/schedule.ts';
import type { Engine } from '../engines/engine.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import { findLatestCheckpoint, loadCheckpoint } from '../checkpoint/checkpoint.ts';
import { assertImplemented, METHODS, runDir as runDirOf, usesTeacher, warmupIterations, type TrainConfig } from '../config/config.ts';
import { checkEnvironment } from '../envs/environment.ts';
import { drawTrainingTasks } from '../eval/tasks.ts';
import { checkEnvFailures, countEnvFailures } from '../rollout/env_failures.ts';
import { describePacking, trainingIteration, type Reference } from './iteration.ts';
import { runMethod } from '../config/methods.ts';
import { rolloutMetrics, summaryLine, type Metrics } from '../report/metrics.ts';
import { timeLeftText } from '../report/time_left.ts';
import { Rng } from '../util/random.ts';
import { Run, type TrainOptions, type TrainResult } from '../run/run.ts';

import { runSft } from '../sft/sft_run.ts';
import { isTeacherDir, loadTeacher, type TeacherSource } from './teacher.ts';
import { trainableParams } from '../run/trainable.ts';
import { scoringTemperature } from './update.ts';
import { connectServers, envServerMetrics, serverLoadMetrics, type RunServers } from './servers.ts';

/** Checks what the config names on disk, so a typo fails before any GPU work. */
export function checkRunInputs(cfg: TrainConfig): void {
  assertImplemented(cfg.method, METHODS as readonly string[]);
  const model = cfg.model.path;
  if (!storage().exists(path.join(model, 'config.json'))) {
    throw new Error(`model.path: ${model} is not a Hugging Face checkpoint directory (no config.json)${model === 'models/household-tiny' ? '; make it with `npx bun run cli make-default-model`' : ''}`);
  }
  if (!storage().exists(path.join(model, 'tokenizer.json'))) throw new Error(`model.path: ${model} has no tokenizer.json`);
  checkModelContext(cfg);
  const teacher = methodDefinition(cfg.method).frozenTeacher?.(cfg.algorithm[cfg.method]);
  if (teacher && !isTeacherDir(teacher)) {
    throw new Error(`algorithm.${cfg.method}: the teacher ${teacher} is neither a Hugging Face model directory (config.json) nor a training checkpoint (checkpoint.json)`);
  }
  // Throws, naming the settings to change, when the run cannot fit its GPU memory budget.
  trainingMemoryPlan(cfg);
}

/** The run of one stage of a staged method: its method and iterations, in "<run><suffix>", with the stage's options. */
function stageConfig(cfg: TrainConfig, stage: Stage<unknown>, previousCheckpoint: string | null): TrainConfig {
  const method = stage.method as TrainConfig['method'];
  const options = stage.options && previousCheckpoint !== null ? stage.options(previousCheckpoint) : cfg.algorithm[method];
  return {
    ...cfg,
    method,
    iterations: stage.iterations,
    algorithm: { ...cfg.algorithm, [method]: options },
    output: { ...cfg.output, runName: `${cfg.output.runName}${stage.suffix}` },
  };
}

/** The configuration of the first run a method makes: its first stage's for a staged method, else its own. */
export function firstRunConfig(cfg: TrainConfig): TrainConfig {
  const stages = methodDefinition(cfg.method).stages?.(cfg.algorithm[cfg.method], cfg.iterations);
  return stages ? stageConfig(cfg, stages[0], null) : cfg;
}

/** A staged method: each stage a run of its own, the next one started from the last checkpoint of the one before; --resume continues any. */
async function trainStages(cfg: TrainConfig, stages: Stage<unknown>[], opts: TrainOptions): Promise<TrainResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  let previous: string | null = null;
  let result: TrainResult | null = null;
  for (const [i, stage] of stages.entries()) {
    if (stage.options && previous === null) throw new Error(`${cfg.method}: stage ${i + 1} starts from the previous stage's checkpoint, and there is none`);
    const stageCfg = stageConfig(cfg, stage, previous);
    const dir = runDirOf(stageCfg);
    const latest = findLatestCheckpoint(path.join(dir, 'checkpoints'));
    const done = latest !== null && loadCheckpoint(latest).iteration >= stageCfg.iterations;
    if (opts.resume && done && i < stages.length - 1) {
      log(`${cfg.method}: stage ${i + 1} (${stage.method}) already complete in ${dir}`);
    } else {
      log(`${cfg.method} stage ${i + 1} of ${stages.length}: ${stage.method} for ${stage.iterations} iterations in ${dir}${previous ? `, from ${previous}` : ''}`);
      result = await train(stageCfg, { ...opts, resume: opts.resume && latest !== null });
      if (result.iterations < stageCfg.iterations) return result;
    }
    previous = findLatestCheckpoint(path.join(dir, 'checkpoints'));
    if (previous === null) throw new Error(`${cfg.method}: stage ${i + 1} left no checkpoint under ${path.join(dir, 'checkpoints')}`);
  }
  return result!;
}

export async function train(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  checkRunInputs(cfg);
  // An environment server that is down or of another kind stops the run before anything is made.
  await checkEnvironment(cfg);
  const def = methodDefinition(cfg.method);
  if (def.loop === 'sft') return runSft(cfg, opts);
  const stages = def.stages?.(cfg.algorithm[cfg.method], cfg.iterations);
  if (stages) return trainStages(cfg, stages, opts);
  // Inference servers that are down, serve another model or are synced by another run stop it before the run directory is made.
  const frozen = def.frozenTeacher?.(cfg.algorithm[cfg.method]);
  const servers = await connectServers(cfg, await loadTokenizer(cfg.model.path), opts.log ?? ((l: string) => console.log(l)), { teacherOnServer: !frozen && usesTeacher(cfg) });
  try {
    const run = new Run(cfg, opts);
    try {
      return await trainRun(run, opts, servers);
    } catch (e) {
      run.abandon();
      throw e;
    }
  } finally {
    servers.close();
  }
}

/** The RL loop of one run (not staged, not SFT). */
async function trainRun(run: Run, opts: TrainOptions, servers: RunServers): Promise<TrainResult> {
  const cfg = run.cfg;
  const log = run.log;
  const def = methodDefinition(cfg.method);
  const ckpt = run.checkpoint;
  const lora = cfg.model.lora;
  const modelPath = ckpt?.model.kind === 'full' ? ckpt.model.dir : cfg.model.path;
  const memory = applyMemoryPlan(cfg, log);
  const model = loadCausalLM(modelPath, { trainable: !lora });
  model.checkpointLayers = memory.checkpointLayers;
  if (lora) {
    if (ckpt?.model.kind === 'lora') loadLora(model, ckpt.model.adapterDir);
    else attachLora(model, { r: lora.r, alpha: lora.alpha, targetModules: lora.targetModules, useRslora: lora.useRslora, baseModel: cfg.model.path }, cfg.seed);
  }
  const tokenizer: Tokenizer = await loadTokenizer(cfg.model.path);
  const params = trainableParams(model, cfg);
  const optimizer = new AdamW(params, { lr: cfg.optim.lr, betas: cfg.optim.betas, eps: cfg.optim.eps, weightDecay: cfg.optim.weightDecay });
  if (ckpt) optimizer.loadStateDict(ckpt.optimizerState);

  const reference: Reference = cfg.algorithm.klCoef <= 0 ? { kind: 'none' } : lora ? { kind: 'lora-base' } : { kind: 'model', model: loadCausalLM(cfg.model.path, { trainable: false }) };
  // Requests to a server name the weights they must be served by: the pool's current version.
  const engine: Engine = servers.rollout
    ?? new LocalEngine(model as never, { tokenizer, name: 'policy', path: modelPath, ...rolloutBatching(memory) });
  const policy = { engine, tokenizer };
  const teacherPath = def.frozenTeacher?.(cfg.algorithm[cfg.method]) ?? null;
  const frozenTeacher = teacherPath ? loadTeacher(teacherPath) : null;
  const teacher: TeacherSource | undefined = frozenTeacher
    ? { kind: 'model', model: frozenTeacher }
    : servers.teacher ? { kind: 'engine', engine: servers.teacher } : undefined;
  /** Writes the weights after `step` updates as the run's current version and puts them on every synced server; the seconds and bytes. */
  const pushWeights = async (step: number) => {
    const v = await servers.versions!.publish(model, step);
    let seconds = v.saveSeconds;
    for (const pool of servers.synced) seconds += await pool.push();
    return { seconds, bytes: v.bytes };
  };

  const checkpointModel = () => (lora ? { kind: 'lora' as const, model: model as never, basePath: cfg.model.path } : { kind: 'full' as const, model: model as never, tokenizerDir: cfg.model.path });

  try {
    const rng = ckpt ? Rng.fromState(ckpt.trainerState.rng.tasks) : Rng.seeded(cfg.seed, 'tasks');
    const start = run.start;
    const method = runMethod(cfg, ckpt?.trainerState.methodState);
    log(`training ${cfg.method} on ${cfg.env.name} from ${cfg.model.path}${lora ? ` with LoRA r=${lora.r}` : ''}: ${cfg.iterations} iterations of ${cfg.rollout.tasksPerIteration} tasks x ${cfg.rollout.groupSize}; run directory ${run.dir}`);
    if (def.interpreted) log(`note: ${def.interpreted}`);
    if (teacherPath) log(`teacher: frozen ${teacherPath} with the skills block`);
    // Methods whose policy prompts carry the skills block validate with it and without it.
    const validate = (iteration: number) => run.validate(policy, iteration, method.plan(Math.max(iteration, 1)).skills === 'policy');

    // Every synced server gets the run's weights before any rollout, unless the probe shows it holds them already.
    if (servers.versions) {
      await servers.versions.publish(model, start);
      for (const pool of servers.synced) await pool.start();
    }
    let last: Metrics = {};
    // A frozen teacher is validated once, with the skills block, before a fresh run's first update.
    let teacherSuccess: number | null = null;
    if (frozenTeacher && !ckpt) {
      const teacherEngine = new LocalEngine(frozenTeacher as never, { tokenizer, name: 'teacher', path: teacherPath! });
      const success = (await run.validationRollout({ engine: teacherEngine, tokenizer }, 0, 'policy', 'teacher-val', 'teacher validation')).stats.successRate;
      teacherSuccess = success;
      const line = method.observe({ kind: 'teacher_validation', success });
      if (line) log(line);
    }
    if (!ckpt && cfg.validation.atStart) {
      last = await validate(0);
      if (teacherSuccess !== null) last['teacher/val_success'] = teacherSuccess;
      run.metrics.log(0, last);
      log(summaryLine(0, cfg.iterations, last));
    }
    let end = Math.min(cfg.iterations, opts.stopAfter !== undefined ? start + opts.stopAfter : cfg.iterations);
    const startedAt = performance.now();
    let slowest = 0;
    // The run log says how episodes are scored and trained at the first iteration, and again whenever that changes.
    let packing = '';
    for (let it = start + 1; it <= end; it++) {
      const iterationStart = performance.now();
      const tasks = drawTrainingTasks(cfg, rng, cfg.rollout.tasksPerIteration);
      const engineSeed = rng.nextU32();
      const file = run.rolloutFile('iter', it);
      const trajectoryLog = file ? new TrajectoryLog(file) : undefined;
      const lr = lrAt(it - 1, { base: cfg.optim.lr, warmupSteps: warmupIterations(cfg.optim, cfg.iterations), kind: cfg.optim.schedule, totalSteps: cfg.iterations, minLr: cfg.optim.minLr });
      const shuffleRng = Rng.seeded(engineSeed, 'shuffle');
      const plan = method.plan(it);
      const a = cfg.algorithm;
      const phaseMemory = new PhaseMemory(runtime());
      // A server restarted since the last check is back on its base weights.
      for (const pool of servers.synced) await pool.ensureCurrent();
      const result = await trainingIteration({
        rollout: {
          ...run.rolloutOptions(policy),
          tasks, groupSize: cfg.rollout.groupSize,
          sampling: { temperature: cfg.rollout.temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed: engineSeed },
          groupIdPrefix: `it${it}-`,
          trajectoryLog,
          onProgress: run.rolloutProgress(`rollout ${it}`, tasks.length * cfg.rollout.groupSize),
        },
        update: {
          model, optimizer, params, lr,
          loss: { clipLow: a.clipLow, clipHigh: a.clipHigh, dualClip: a.dualClip, klCoef: a.klCoef, entropyCoef: plan.entropyCoef, policyGradient: plan.policyGradient },
          gradClip: cfg.optim.gradClip > 0 ? cfg.optim.gradClip : Infinity,
          miniBatchSize: cfg.optim.miniBatchSize,
          microBatchTokens: memory.microBatchTokens,
          temperature: scoringTemperature(cfg.rollout.temperature),
          shuffle: (n) => shuffleRng.shuffle(Array.from({ length: n }, (_, i) => i)),
          correction: a.rolloutCorrection,
        },
        mergeTurns: cfg.optim.mergeTurns,
        reference,
        plan,
        teacher,
        // Too many episodes failed in the environment: stop before training on the rest or saving.
        checkRollout: (r) => checkEnvFailures(countEnvFailures(r.trajectories), cfg.env.maxFailedShare, `iteration ${it}`),
        phase: (label, total) => run.progress.phase(`${label} ${it}`, total),
        memory: phaseMemory,
      });
      trajectoryLog?.close();
      const packed = describePacking(result, cfg.optim.mergeTurns);
      if (packed && packed.key !== packing) {
        log(packed.line);
        packing = packed.key;
      }
      const t = result.times;
      const m: Metrics = {
        ...rolloutMetrics(result.rollout.stats, 'rollout'), ...result.metrics, 'actor/lr': lr,
        'time/old_logprobs': t.oldLogprobs, 'time/teacher': t.teacher, 'time/reference': t.reference, 'time/update': t.update,
      };
      if (result.update) {
        const u = result.update;
        Object.assign(m, {
          'actor/pg_loss': u.pgLoss, 'actor/kl': u.kl, 'actor/entropy': u.entropy, 'actor/clip_frac': u.clipFrac,
          'actor/grad_norm': u.gradNorm, 'actor/skipped_steps': u.skippedSteps, 'actor/steps': u.steps, 'tokens/trained': u.trainedTokens, 'tokens/update_shared_prefix': u.sharedPrefixTokens,
        });
      }
      const stepSeconds = t.rollout + t.oldLogprobs + t.teacher + t.reference + t.update;
      m['time/step'] = stepSeconds;
      m['time/teacher_share'] = t.teacher / Math.max(stepSeconds, 1e-9);
      m['throughput/tokens_per_s'] = (result.rollout.stats.tokensGenerated + (result.update?.trainedTokens ?? 0)) / Math.max(stepSeconds, 1e-9);
      const noted = method.observe({ kind: 'iteration', iteration: it, metrics: m });
      if (noted) log(noted);
      // The servers get the update before validation rolls out on them.
      if (servers.versions && result.update) {
        try {
          const sync = await pushWeights(it);
          m['time/weight_sync'] = sync.seconds;
          m['sync/bytes'] = sync.bytes;
        } catch (e) {
          // The update is kept: the iteration is saved before the run stops, so --resume pushes it again and goes on.
          run.metrics.log(it, m);
          log(`iteration ${it}: pushing the weights to the servers failed; the update is saved below, so --resume pushes it again once the servers are fixed`);
          await run.save({ model: checkpointModel(), optimizerState: await optimizer.stateDict(), trainerState: { iteration: it, configHash: run.hash, rng: { tasks: rng.state() }, metrics: m, methodState: method.state } });
          throw e;
        }
        m['sync/probe_diff'] = Math.max(...servers.synced.map((p) => p.probeDistance ?? 0));
      }
      if (run.isDue(cfg.validation.every, it, cfg.iterations)) {
        Object.assign(m, await validate(it));
        await phaseMemory.end('validation');
        const line = method.observe({ kind: 'validation', iteration: it, success: m['val/success'] });
        if (line) log(line);
      }
      Object.assign(m, phaseMemory.metrics());
      Object.assign(m, envServerMetrics(result.rollout.trajectories));
      if (servers.rollout) {
        const load = serverLoadMetrics(servers.rollout, result.rollout.trajectories);
        Object.assign(m, load.metrics);
        if (servers.rollout.servers.length > 1) log(load.line);
      }
      m['time/iteration'] = (performance.now() - iterationStart) / 1000;
      run.metrics.log(it, m);
      log(summaryLine(it, cfg.iterations, m, timeLeftText((performance.now() - startedAt) / 1000, it - start, end - start)));
      last = m;
      slowest = Math.max(slowest, m['time/iteration']);
      if (opts.timeLimitSeconds !== undefined && it < end && (performance.now() - startedAt) / 1000 + slowest > opts.timeLimitSeconds) end = it;
      if (run.stopRequested) end = it;
      // An invocation that stops early always saves, so --resume loses nothing.
      if (run.isDue(cfg.checkpoint.every, it, cfg.iterations) || it === end) {
        await run.save({
          model: checkpointModel(),
          optimizerState: await optimizer.stateDict(),
          trainerState: { iteration: it, configHash: run.hash, rng: { tasks: rng.state() }, metrics: m, methodState: method.state },
        });
      }
    }
    run.finish(end, cfg.iterations);
    return { runDir: run.dir, iterations: end, lastMetrics: last };
  } finally {
    // The GPU memory goes back when the run ends, so another run in the same process starts from nothing.
    await engine.close?.();
    zeroGrad(params);
    optimizer.dispose();
    for (const m of [model, reference.kind === 'model' ? reference.model : null, frozenTeacher]) {
      if (m) for (const p of [...m.parameters(), ...loraParameters(m)]) p.dispose();
    }
    runtime().releaseCached();
  }
}
