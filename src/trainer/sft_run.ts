// `train --method sft`: supervised fine-tuning on imitation turns as a training run,
// with the RL runs' outputs (config.json, metrics.jsonl, validation trajectories, a
// checkpoint and the HTML report) so SFT and RL runs compare side by side.
//
// Data: algorithm.sft.data (JSONL of trajectory records, `epochs` passes over it) or,
// unset, the environment's expert playing `episodes` fresh train-split episodes per
// epoch (sft_data.ts). Each optimizer step takes optim.miniBatchSize samples on
// average (trainSft batches by tokens: miniBatchSize times the mean sample length),
// cut into passes of optim.microBatchTokens; the metrics' iteration is the step.
// Validation runs the GRPO runs' seeded panel (validation.*) before training when
// validation.atStart is set, and after the last step.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Split } from '../envs/types.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import { attachLora, loraParameters } from '../models/lora.ts';
import { loadTokenizer } from '../models/tokenizer.ts';
import { runRollout } from '../rollout/agent_loop.ts';
import { agentSpec } from '../rollout/agent_spec.ts';
import { LocalEngine } from '../rollout/local_engine.ts';
import { TrajectoryLog } from '../rollout/trajectory_log.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { saveCheckpoint } from './checkpoint.ts';
import { trainableParams } from './trainable.ts';
import { ConfigError, configHash, runDir as runDirOf, warmupIterations, writeRunConfig, type TrainConfig } from './config.ts';
import { encodeSample } from './default_model.ts';
import { makeEnvironment, taskPanel } from './environment.ts';
import { MetricsLogger, rolloutMetrics, summaryLine, type Metrics } from './metrics.ts';
import { Progress } from './progress.ts';
import { writeReport } from './report.ts';
import { Rng } from './rng.ts';
import { expertSamples, readSftRecords, selectTurns, type TurnSelection } from './sft_data.ts';
import { formatSftStep, trainSft, type SftSample, type SftStepStats } from './sft.ts';
import type { TrainOptions, TrainResult } from './train.ts';

/** Refusals that need no GPU: settings SFT cannot honour, a missing model, an unreadable data file. */
function checkSftInputs(cfg: TrainConfig, opts: TrainOptions): void {
  if (cfg.method !== 'sft') throw new ConfigError(`method: runSft runs method "sft", got "${cfg.method}"`);
  for (const [flag, given] of [['--resume', opts.resume], ['--stop-after', opts.stopAfter !== undefined], ['--time-limit', opts.timeLimitSeconds !== undefined]] as const) {
    if (given) throw new ConfigError(`${flag}: not supported with method sft (it trains all its epochs in one invocation)`);
  }
  if (cfg.optim.schedule === 'linear') throw new ConfigError('optim.schedule: method sft supports "constant" and "cosine" (warmup, then cosine to optim.minLr), not "linear"');
  if (cfg.rollout.engine !== 'local') throw new ConfigError('rollout.engine: method sft validates with the weights it trains, so it needs "local"');
  for (const file of ['config.json', 'tokenizer.json']) {
    if (!fs.existsSync(path.join(cfg.model.path, file))) throw new ConfigError(`model.path: ${cfg.model.path} is not a Hugging Face model directory (no ${file})`);
  }
}

/**
 * The model as trainSft sees it: the same forward, with parameters() narrowed to the
 * weights that train. trainSft optimises model.parameters(), which holds the base
 * weights only, so LoRA branches would otherwise have nothing to train.
 */
function trainingView(model: CausalLM, params: readonly Tensor[]): CausalLM {
  return {
    config: model.config,
    params: model.params,
    lora: model.lora,
    get loraConfig() {
      return model.loraConfig;
    },
    set loraConfig(c) {
      model.loraConfig = c;
    },
    param: (name) => model.param(name),
    lmHead: () => model.lmHead(),
    hidden: (batch) => model.hidden(batch),
    hiddenCached: (batch, cache) => model.hiddenCached(batch, cache),
    newCache: (batch, capacity, padLeft) => model.newCache(batch, capacity, padLeft),
    logits: (batch) => model.logits(batch),
    parameters: () => [...params],
  };
}

function dataSummary(what: string, sel: TurnSelection, samples: readonly SftSample[]): string {
  const prompt = samples.reduce((n, s) => n + s.promptIds.length, 0) / samples.length;
  const response = samples.reduce((n, s) => n + s.responseIds.length, 0) / samples.length;
  const skipped = sel.skippedEpisodes || sel.skippedTurns ? `; left out ${sel.skippedEpisodes} lost or failed episodes and ${sel.skippedTurns} invalid turns` : '';
  return `sft data: ${samples.length} turns from ${what} (prompt mean ${prompt.toFixed(0)} tokens, response mean ${response.toFixed(1)})${skipped}`;
}

export async function runSft(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  checkSftInputs(cfg, opts);
  const log = opts.log ?? ((l: string) => console.log(l));
  const sft = cfg.algorithm.sft;
  // A bad data file fails here, before the model is on the GPU.
  const fileRecords = sft.data ? readSftRecords(sft.data) : null;
  const fileTurns = fileRecords ? selectTurns(fileRecords) : null;
  if (fileTurns && fileTurns.samples.length === 0) {
    throw new ConfigError(`algorithm.sft.data: ${sft.data} has no turn to imitate (${fileTurns.skippedEpisodes} lost or failed episodes, ${fileTurns.skippedTurns} invalid turns)`);
  }

  const dir = runDirOf(cfg);
  const metrics = new MetricsLogger(dir, { tensorboard: cfg.output.tensorboard, overwrite: opts.overwrite });
  writeRunConfig(dir, cfg);
  const progress = new Progress(process.stdout, cfg.output.progress);
  const lora = cfg.model.lora;
  const model = loadCausalLM(cfg.model.path, { trainable: !lora });
  try {
    if (lora) attachLora(model, { r: lora.r, alpha: lora.alpha, targetModules: lora.targetModules, useRslora: lora.useRslora, baseModel: cfg.model.path }, cfg.seed);
    const params = trainableParams(model, cfg);
    const tokenizer = await loadTokenizer(cfg.model.path);
    log(`training sft on ${cfg.env.name} from ${cfg.model.path}${lora ? ` with LoRA r=${lora.r}` : ''}: ${sft.epochs} epoch(s) of ${sft.data ? sft.data : `${sft.episodes} expert episodes`}; run directory ${dir}`);

    const dataRng = Rng.seeded(cfg.seed, 'sft-data');
    let selection: TurnSelection;
    let passes: number;
    if (fileTurns) {
      selection = fileTurns;
      passes = sft.epochs;
    } else {
      const phase = progress.phase('expert episodes', sft.episodes * sft.epochs);
      selection = await expertSamples(cfg, tokenizer, sft.episodes * sft.epochs, dataRng);
      phase.finish(`${selection.samples.length} turns`);
      if (selection.samples.length === 0) throw new Error(`sft: the ${cfg.env.name} expert won none of its ${sft.episodes * sft.epochs} episodes`);
      passes = 1;
    }
    const samples = selection.samples.map((s) => encodeSample(tokenizer, s, cfg.rollout.maxPromptTokens));
    log(dataSummary(sft.data ? sft.data : `${sft.episodes * sft.epochs} expert episodes`, selection, samples));

    const sampleTokens = samples.reduce((n, s) => n + s.promptIds.length + s.responseIds.length, 0);
    const batchTokens = Math.max(1, Math.round((cfg.optim.miniBatchSize * sampleTokens) / samples.length));
    const steps = Math.max(1, Math.ceil((passes * sampleTokens) / batchTokens));
    const stepsPerEpoch = steps / sft.epochs;

    const engine = new LocalEngine(model, { tokenizer, name: 'policy', path: cfg.model.path });
    const env = makeEnvironment(cfg);
    const panel = taskPanel(cfg.validation.split as Split, cfg.validation.seed, cfg.validation.tasks);
    const validate = async (iteration: number): Promise<Metrics> => {
      const file = cfg.output.trajectories ? path.join(dir, 'rollouts', `val-${iteration}.jsonl`) : null;
      if (file) fs.rmSync(file, { force: true });
      const trajectoryLog = file ? new TrajectoryLog(file) : undefined;
      const phase = progress.phase('validation', panel.length);
      try {
        const { stats } = await runRollout({
          env, spec: agentSpec(cfg.env.name), engine, tokenizer, tasks: panel, groupSize: 1,
          sampling: { temperature: cfg.validation.temperature, topP: cfg.rollout.topP, topK: cfg.rollout.topK, seed: cfg.validation.seed },
          maxPromptTokens: cfg.rollout.maxPromptTokens,
          maxResponseTokens: cfg.rollout.maxResponseTokens,
          maxTurns: cfg.rollout.maxTurns,
          stopAfterAction: cfg.rollout.stopAfterAction,
          concurrency: cfg.rollout.concurrency,
          envTimeoutMs: cfg.env.timeoutMs,
          groupIdPrefix: `val${iteration}-`,
          trajectoryLog,
          onProgress: (p) => (p.completed + p.failed >= p.total ? phase.finish(`${p.turns} turns`) : phase.update(p.completed + p.failed, `${p.turns} turns`)),
        });
        return rolloutMetrics(stats, 'val');
      } finally {
        trajectoryLog?.close();
      }
    };

    if (cfg.validation.atStart) {
      const m = await validate(0);
      metrics.log(0, m);
      log(summaryLine(0, steps, m));
    }
    const logEvery = Math.max(1, Math.floor(steps / 20));
    let previousSeconds = 0;
    const stepMetrics = (s: SftStepStats): Metrics => {
      const m: Metrics = {
        'sft/loss': s.loss, 'sft/epoch': s.step / stepsPerEpoch, 'actor/lr': s.lr, 'actor/grad_norm': s.gradNorm, 'actor/skipped_steps': s.skipped ? 1 : 0,
        'sft/sequences': s.sequences, 'tokens/trained': s.responseTokens, 'tokens/padded': s.paddedTokens,
        'time/update': s.seconds - previousSeconds, 'throughput/tokens_per_s': s.tokensPerSecond,
      };
      previousSeconds = s.seconds;
      return m;
    };
    log(`sft: ${steps} steps of ~${cfg.optim.miniBatchSize} samples (${batchTokens} tokens), lr ${cfg.optim.lr} ${cfg.optim.schedule}`);
    // Each step's row is written when the next step ends; the last one waits for the final validation, to share its row.
    let pending = null as { step: number; metrics: Metrics } | null;
    const result = await trainSft(trainingView(model, params), samples, {
      steps,
      batchTokens,
      microBatchTokens: cfg.optim.microBatchTokens,
      lr: cfg.optim.lr,
      // trainSft decays by cosine; a cosine down to lr itself is the constant schedule.
      minLr: cfg.optim.schedule === 'constant' ? cfg.optim.lr : cfg.optim.minLr,
      warmupSteps: warmupIterations(cfg.optim, steps),
      weightDecay: cfg.optim.weightDecay,
      maxGradNorm: cfg.optim.gradClip > 0 ? cfg.optim.gradClip : Infinity,
      seed: cfg.seed,
      onStep: (s) => {
        if (pending) metrics.log(pending.step, pending.metrics);
        pending = { step: s.step, metrics: stepMetrics(s) };
        if (s.step === 1 || s.step % logEvery === 0 || s.step === s.steps) log(formatSftStep(s));
      },
    });
    const last: Metrics = { ...pending!.metrics, ...(await validate(steps)) };
    metrics.log(steps, last);
    log(summaryLine(steps, steps, last));
    log(`sft loss ${result.losses[0].toFixed(4)} -> ${result.losses[result.losses.length - 1].toFixed(4)} in ${result.seconds.toFixed(1)}s`);

    const where = await saveCheckpoint(path.join(dir, 'checkpoints'), {
      model: lora ? { kind: 'lora', model: model as never, basePath: cfg.model.path } : { kind: 'full', model: model as never, tokenizerDir: cfg.model.path },
      // trainSft keeps its optimizer to itself; an SFT checkpoint is a starting point, not a run to resume.
      optimizerState: {},
      trainerState: { iteration: steps, configHash: configHash(cfg), rng: { data: dataRng.state() }, metrics: last, method: 'sft', epochs: sft.epochs },
    }, { keepLast: cfg.checkpoint.keepLast });
    log(`checkpoint ${where}`);
    metrics.close();
    log(`report ${writeReport(dir)}`);
    return { runDir: dir, iterations: steps, lastMetrics: last };
  } finally {
    metrics.close();
    for (const p of [...model.parameters(), ...loraParameters(model)]) p.dispose();
  }
}
