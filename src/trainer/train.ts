// The GRPO training run: build the model, engine and environment from a validated
// config, then iterate rollout -> advantages -> update, validating on a fixed seeded
// panel, logging metrics and trajectories, and checkpointing (resumable: the same
// seeds give the same run whether or not it was interrupted).

import * as fs from 'node:fs';
import * as path from 'node:path';
import { getEnvironment } from '../../envs/registry.ts';
import { AGENTGYM_PRESETS, AgentGymEnvironment } from '../envs/agentgym.ts';
import { RemoteEnvironment } from '../envs/client.ts';
import type { Environment, Split } from '../envs/types.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import { attachLora, loadLora, loraParameters } from '../models/lora.ts';
import { loadTokenizer, type Tokenizer } from '../models/tokenizer.ts';
import { AdamW } from '../optim/adamw.ts';
import { lrAt } from '../optim/schedule.ts';
import { agentSpec } from '../rollout/agent_spec.ts';
import { runRollout, type RolloutOptions, type RolloutTask } from '../rollout/agent_loop.ts';
import type { Engine } from '../rollout/engine.ts';
import { HttpEngine } from '../rollout/http_engine.ts';
import { LocalEngine } from '../rollout/local_engine.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { assertResumable, findLatestCheckpoint, loadCheckpoint, saveCheckpoint } from './checkpoint.ts';
import { assertImplemented, configHash, runDir as runDirOf, writeRunConfig, type TrainConfig } from './config.ts';
import { grpoIteration, type Reference } from './grpo_iteration.ts';
import { MetricsLogger, rolloutMetrics, summaryLine, type Metrics } from './metrics.ts';
import { Progress } from './progress.ts';
import { writeReport } from './report.ts';
import { RemoteWeights } from './weight_sync.ts';
import { Rng } from './rng.ts';

export const IMPLEMENTED_METHODS = ['grpo'];

export interface TrainOptions {
  /** Continue the run in the output directory from its latest checkpoint. */
  resume?: boolean;
  /** Replace an existing run's metrics instead of refusing. */
  overwrite?: boolean;
  /** Stop after this many iterations in this invocation (time-boxed jobs); `resume` continues. */
  stopAfter?: number;
  log?: (line: string) => void;
}

export interface TrainResult {
  runDir: string;
  iterations: number;
  lastMetrics: Metrics;
}

/** The seeds of the task splits are drawn in [0, 1e9) (the environments' seed range). */
const SEED_RANGE = 1_000_000_000;

function environment(cfg: TrainConfig): Environment {
  if (cfg.env.url && cfg.env.agentgym) {
    const preset = cfg.env.name === 'shop' ? AGENTGYM_PRESETS.webshop : cfg.env.name === 'household' ? AGENTGYM_PRESETS.alfworld : null;
    if (!preset) throw new Error(`env.agentgym: no AgentGym preset for "${cfg.env.name}" (have household = ALFWorld, shop = WebShop)`);
    return new AgentGymEnvironment(cfg.env.url, { ...preset, timeoutMs: cfg.env.timeoutMs });
  }
  if (cfg.env.url) return new RemoteEnvironment(cfg.env.url, { name: cfg.env.name, version: 'remote', maxSteps: cfg.rollout.maxTurns }, { timeoutMs: cfg.env.timeoutMs });
  return getEnvironment(cfg.env.name);
}

function trainableParams(model: CausalLM, cfg: TrainConfig): Tensor[] {
  if (cfg.model.lora) return loraParameters(model);
  const all = model.parameters();
  const want = cfg.model.trainable;
  if (!want) return all;
  const chosen = all.filter((p) => want.some((w) => p.name?.includes(w)));
  for (const p of all) p.requiresGrad = chosen.includes(p);
  if (!chosen.length) throw new Error(`model.trainable ${JSON.stringify(want)} matches no parameter of ${cfg.model.path}`);
  return chosen;
}

/** Checks what the config names on disk, so a typo fails before any GPU work. */
export function checkRunInputs(cfg: TrainConfig): void {
  assertImplemented(cfg.method, IMPLEMENTED_METHODS);
  const model = cfg.model.path;
  if (!fs.existsSync(path.join(model, 'config.json'))) {
    throw new Error(`model.path: ${model} is not a Hugging Face checkpoint directory (no config.json)${model === 'models/household-tiny' ? '; make it with `bun run cli make-default-model`' : ''}`);
  }
  if (!fs.existsSync(path.join(model, 'tokenizer.json'))) throw new Error(`model.path: ${model} has no tokenizer.json`);
  if (cfg.rollout.engine === 'http') requireServedModel(cfg);
}

function requireServedModel(cfg: TrainConfig): string {
  if (!cfg.rollout.model) throw new Error('rollout.model: required with rollout.engine http (the model name the server serves)');
  return cfg.rollout.model;
}

export async function train(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  checkRunInputs(cfg);
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
    ? new LocalEngine(model as never, { tokenizer, name: 'policy', path: modelPath })
    : new HttpEngine({ baseUrl: cfg.rollout.url!, model: requireServedModel(cfg) });
  const remote = engine instanceof HttpEngine ? new RemoteWeights(engine, path.join(dir, 'sync'), !!lora) : null;
  const env = environment(cfg);
  const spec = agentSpec(cfg.env.name);

  const rng = ckpt ? Rng.fromState(ckpt.trainerState.rng.tasks) : Rng.seeded(cfg.seed, 'tasks');
  const start = ckpt?.trainerState.iteration ?? 0;
  fs.mkdirSync(dir, { recursive: true });
  writeRunConfig(dir, cfg);
  const metrics = new MetricsLogger(dir, { tensorboard: cfg.output.tensorboard, resumeFrom: ckpt ? start : undefined, overwrite: opts.overwrite });
  const progress = new Progress(process.stdout, cfg.output.progress);
  if (ckpt) log(`resuming ${dir} after iteration ${start} (${resumeFrom})`);
  log(`training ${cfg.method} on ${cfg.env.name} from ${cfg.model.path}${lora ? ` with LoRA r=${lora.r}` : ''}: ${cfg.iterations} iterations of ${cfg.rollout.tasksPerIteration} tasks x ${cfg.rollout.groupSize}; run directory ${dir}`);

  const rolloutBase = (tasks: RolloutTask[], groupSize: number, temperature: number, seed: number, label: string, trajectoryLog?: TrajectoryLog): RolloutOptions => {
    const phase = progress.phase(label, tasks.length * groupSize);
    return {
      env, spec, engine, tokenizer, tasks, groupSize, model: remote?.modelName,
      sampling: { temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed },
      maxPromptTokens: cfg.rollout.maxPromptTokens,
      maxResponseTokens: cfg.rollout.maxResponseTokens,
      maxTurns: cfg.rollout.maxTurns,
      concurrency: cfg.rollout.concurrency,
      envTimeoutMs: cfg.env.timeoutMs,
      trajectoryLog,
      onProgress: (p) => (p.completed + p.failed >= p.total ? phase.finish(`${p.turns} turns`) : phase.update(p.completed + p.failed, `${p.turns} turns, ${p.tokensGenerated} tokens`)),
    };
  };
  const validationPanel: RolloutTask[] = Array.from({ length: cfg.validation.tasks }, (_, i) => ({ split: cfg.validation.split as Split, seed: cfg.validation.seed + i }));
  const validate = async (iteration: number): Promise<Metrics> => {
    const r = await runRollout({ ...rolloutBase(validationPanel, 1, cfg.validation.temperature, cfg.validation.seed, 'validation'), groupIdPrefix: `val${iteration}-` });
    return rolloutMetrics(r.stats, 'val');
  };
  const isDue = (every: number, it: number) => it === cfg.iterations || (every > 0 && it % every === 0);

  // The server starts from the base weights; a resumed or LoRA run sends its own first.
  if (remote && (ckpt || lora)) await remote.push(model, start);
  let last: Metrics = {};
  if (!ckpt && cfg.validation.atStart) {
    last = await validate(0);
    metrics.log(0, last);
    log(summaryLine(0, cfg.iterations, last));
  }
  const end = Math.min(cfg.iterations, opts.stopAfter !== undefined ? start + opts.stopAfter : cfg.iterations);
  for (let it = start + 1; it <= end; it++) {
    const tasks: RolloutTask[] = Array.from({ length: cfg.rollout.tasksPerIteration }, () => ({ split: cfg.env.trainSplit as Split, seed: rng.nextU32() % SEED_RANGE }));
    const engineSeed = rng.nextU32();
    const trajectoryLog = cfg.output.trajectories ? new TrajectoryLog(path.join(dir, 'rollouts', `iter-${it}.jsonl`)) : undefined;
    const lr = lrAt(it - 1, { base: cfg.optim.lr, warmupSteps: cfg.optim.warmupSteps, kind: cfg.optim.schedule, totalSteps: cfg.iterations, minLr: cfg.optim.minLr });
    const shuffleRng = Rng.seeded(engineSeed, 'shuffle');
    const result = await grpoIteration(
      { ...rolloutBase(tasks, cfg.rollout.groupSize, cfg.rollout.temperature, engineSeed, `rollout ${it}`, trajectoryLog), groupIdPrefix: `it${it}-` },
      {
        model, optimizer, params, lr,
        loss: { clipLow: cfg.algorithm.clipLow, clipHigh: cfg.algorithm.clipHigh, dualClip: cfg.algorithm.dualClip, klCoef: cfg.algorithm.klCoef, entropyCoef: cfg.algorithm.entropyCoef },
        gradClip: cfg.optim.gradClip > 0 ? cfg.optim.gradClip : Infinity,
        miniBatchSize: cfg.optim.miniBatchSize,
        microBatchTokens: cfg.optim.microBatchTokens,
        shuffle: (n) => shuffleRng.shuffle(Array.from({ length: n }, (_, i) => i)),
      },
      reference,
    );
    trajectoryLog?.close();
    const syncStart = performance.now();
    if (remote && result.update) await remote.push(model, it);
    const m: Metrics = { ...rolloutMetrics(result.rollout.stats, 'rollout'), 'actor/lr': lr, 'time/old_logprobs': result.times.oldLogprobs, 'time/reference': result.times.reference, 'time/update': result.times.update };
    if (remote) m['time/weight_sync'] = (performance.now() - syncStart) / 1000;
    if (result.update) {
      const u = result.update;
      Object.assign(m, {
        'actor/pg_loss': u.pgLoss, 'actor/kl': u.kl, 'actor/entropy': u.entropy, 'actor/clip_frac': u.clipFrac,
        'actor/grad_norm': u.gradNorm, 'actor/skipped_steps': u.skippedSteps, 'actor/steps': u.steps, 'tokens/trained': u.trainedTokens,
      });
    }
    const stepSeconds = result.times.rollout + result.times.oldLogprobs + result.times.reference + result.times.update;
    m['time/step'] = stepSeconds;
    m['throughput/tokens_per_s'] = (result.rollout.stats.tokensGenerated + (result.update?.trainedTokens ?? 0)) / Math.max(stepSeconds, 1e-9);
    if (isDue(cfg.validation.every, it)) Object.assign(m, await validate(it));
    metrics.log(it, m);
    log(summaryLine(it, cfg.iterations, m));
    last = m;
    if (isDue(cfg.checkpoint.every, it)) {
      const where = await saveCheckpoint(ckptRoot, {
        model: lora ? { kind: 'lora', model: model as never, basePath: cfg.model.path } : { kind: 'full', model: model as never, tokenizerDir: cfg.model.path },
        optimizerState: await optimizer.stateDict(),
        trainerState: { iteration: it, configHash: hash, rng: { tasks: rng.state() }, metrics: m },
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
