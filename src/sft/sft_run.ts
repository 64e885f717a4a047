// `train --method sft`: supervised fine-tuning on imitation turns as a training run,
// with the RL runs' outputs (config.json, metrics.jsonl, validation trajectories,
// checkpoints and the HTML report) so SFT and RL runs compare side by side, and their
// resumption (--resume, --stop-after, --time-limit, Ctrl-C) since a run's iteration is
// an optimizer step.
//
// Data: algorithm.sft.data (JSONL of trajectory records, `epochs` passes over it) or,
// unset, the environment's expert playing `episodes` fresh train-split episodes per
// epoch (sft_data.ts). Each optimizer step takes optim.miniBatchSize samples on
// average (trainSft batches by tokens: miniBatchSize times the mean sample length),
// cut into passes of optim.microBatchTokens; the metrics' iteration is the step.
// Validation runs the RL runs' seeded panel (validation.*) before training when
// validation.atStart is set, and after the last step. Checkpoints every
// checkpoint.every steps and when an invocation stops hold the weights and the
// optimizer's state; the data are made again from the run's seed on --resume.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import { attachLora, loadLora, loraParameters } from '../lora/lora.ts';
import { loadTokenizer } from '../tokenizer/tokenizer.ts';
import { methodDefinition } from '../algos/methods/index.ts';
import { AdamW } from '../optim/adamw.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { PhaseMemory } from '../gpu/phase_memory.ts';
import { runtime } from '../gpu/runtime.ts';
import { applyMemoryPlan } from '../run/memory.ts';
import { rolloutBatching } from '../memory/memory_plan.ts';
import { ConfigError, warmupIterations, type TrainConfig } from '../config/config.ts';
import { summaryLine, type Metrics } from '../report/metrics.ts';
import { PLAIN_EVERY_MS } from '../report/progress.ts';
import { timeLeftText } from '../report/time_left.ts';
import { Rng } from '../util/random.ts';
import { Run, type TrainOptions, type TrainResult } from '../run/run.ts';
import { checkThinking, expertSamples, readSftRecords, selectTurns, sftSamples, type TurnSelection } from './sft_data.ts';
import { formatSftStep, trainSft, type SftSample, type SftStepStats } from './sft.ts';
import { trainableParams } from '../run/trainable.ts';

/** Refusals that need no GPU: settings SFT cannot honour, a missing model, an unreadable data file. */
function checkSftInputs(cfg: TrainConfig): void {
  const def = methodDefinition(cfg.method);
  if (def.loop !== 'sft') throw new ConfigError(`method: runSft runs supervised fine-tuning, and ${cfg.method} trains by ${def.loop}`);
  if (cfg.optim.schedule === 'linear') throw new ConfigError('optim.schedule: method sft supports "constant" and "cosine" (warmup, then cosine to optim.minLr), not "linear"');
  if (cfg.rollout.engine !== 'local') throw new ConfigError('rollout.engine: method sft validates with the weights it trains, so it needs "local"');
  if (cfg.env.agentgym && !cfg.algorithm.sft.data) throw new ConfigError('algorithm.sft.data: method sft on an AgentGym server needs its demonstrations in a file (AgentGym\'s servers have no expert to play them)');
  for (const file of ['config.json', 'tokenizer.json']) {
    if (!storage().exists(path.join(cfg.model.path, file))) throw new ConfigError(`model.path: ${cfg.model.path} is not a Hugging Face model directory (no ${file})`);
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
    get checkpointLayers() {
      return model.checkpointLayers;
    },
    set checkpointLayers(on) {
      model.checkpointLayers = on;
    },
    param: (name) => model.param(name),
    lmHead: () => model.lmHead(),
    hidden: (batch) => model.hidden(batch),
    hiddenCached: (batch, cache) => model.hiddenCached(batch, cache),
    newCache: (batch, capacity, padLeft) => model.newCache(batch, capacity, padLeft),
    hiddenAfterPrefixes: (prefixes, rows) => model.hiddenAfterPrefixes(prefixes, rows),
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
  checkSftInputs(cfg);
  const sft = cfg.algorithm.sft;
  // A bad data file fails here, before the model is on the GPU.
  const fileRecords = sft.data ? readSftRecords(sft.data) : null;
  const fileTurns = fileRecords ? selectTurns(fileRecords) : null;
  if (fileTurns) checkThinking(fileTurns, cfg.model.thinking, sft.data!);
  if (fileTurns && fileTurns.samples.length === 0) {
    throw new ConfigError(`algorithm.sft.data: ${sft.data} has no turn to imitate (${fileTurns.skippedEpisodes} lost or failed episodes, ${fileTurns.skippedTurns} invalid turns)`);
  }
  const run = new Run(cfg, opts);
  const log = run.log;
  const ckpt = run.checkpoint;
  const lora = cfg.model.lora;
  const memory = applyMemoryPlan(cfg, log);
  const model = loadCausalLM(ckpt?.model.kind === 'full' ? ckpt.model.dir : cfg.model.path, { trainable: !lora });
  model.checkpointLayers = memory.checkpointLayers;
  let optimizer: AdamW | null = null;
  try {
    if (lora) {
      if (ckpt?.model.kind === 'lora') loadLora(model, ckpt.model.adapterDir);
      else attachLora(model, { r: lora.r, alpha: lora.alpha, targetModules: lora.targetModules, useRslora: lora.useRslora, baseModel: cfg.model.path }, cfg.seed);
    }
    const params = trainableParams(model, cfg);
    const adamw = new AdamW(params, { lr: cfg.optim.lr, weightDecay: cfg.optim.weightDecay });
    optimizer = adamw;
    if (ckpt) adamw.loadStateDict(ckpt.optimizerState);
    const tokenizer = await loadTokenizer(cfg.model.path);
    log(`training sft on ${cfg.env.name} from ${cfg.model.path}${lora ? ` with LoRA r=${lora.r}` : ''}: ${sft.epochs} epoch(s) of ${sft.data ? sft.data : `${sft.episodes} expert episodes`}; run directory ${run.dir}`);

    // The data come from the run's seed, so a resumed run trains on the same turns in the same order.
    const dataRng = Rng.seeded(cfg.seed, 'sft-data');
    let selection: TurnSelection;
    let passes: number;
    if (fileTurns) {
      selection = fileTurns;
      passes = sft.epochs;
    } else {
      const phase = run.progress.phase('expert episodes', sft.episodes * sft.epochs);
      selection = await expertSamples(cfg, tokenizer, sft.episodes * sft.epochs, dataRng);
      phase.finish(`${selection.samples.length} turns`);
      if (selection.samples.length === 0) throw new Error(`sft: the ${cfg.env.name} expert won none of its ${sft.episodes * sft.epochs} episodes`);
      passes = 1;
    }
    const samples = sftSamples(tokenizer, selection, cfg.rollout.maxPromptTokens, cfg.model.thinking, sft.data ?? `${cfg.env.name} expert`);
    log(dataSummary(sft.data ? sft.data : `${sft.episodes * sft.epochs} expert episodes`, selection, samples));

    const sampleTokens = samples.reduce((n, s) => n + s.promptIds.length + s.responseIds.length, 0);
    const batchTokens = Math.max(1, Math.round((cfg.optim.miniBatchSize * sampleTokens) / samples.length));
    const steps = Math.max(1, Math.ceil((passes * sampleTokens) / batchTokens));
    const stepsPerEpoch = steps / sft.epochs;
    if (run.start > steps) throw new ConfigError(`--resume: the checkpoint is at step ${run.start}, past this run's ${steps} steps`);

    const policy = { engine: new LocalEngine(model, { tokenizer, name: 'policy', path: cfg.model.path, ...rolloutBatching(memory) }), tokenizer };
    // Each row carries the GPU memory of what ran since the row before: its step, and validation where one ran.
    let phases = new PhaseMemory(runtime());
    const validate = async (step: number): Promise<Metrics> => {
      const m = await run.validate(policy, step, false);
      await phases.end('validation');
      return { ...m, ...phases.metrics() };
    };
    if (!ckpt && cfg.validation.atStart) {
      const m = await validate(0);
      phases = new PhaseMemory(runtime());
      run.metrics.log(0, m);
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
      phases.record('update');
      Object.assign(m, phases.metrics());
      previousSeconds = s.seconds;
      return m;
    };
    const save = async (step: number, metrics: Metrics) => run.save({
      model: lora ? { kind: 'lora', model: model as never, basePath: cfg.model.path } : { kind: 'full', model: model as never, tokenizerDir: cfg.model.path },
      optimizerState: await adamw.stateDict(),
      trainerState: { iteration: step, configHash: run.hash, rng: { data: dataRng.state() }, metrics, epochs: sft.epochs },
    });
    log(`sft: ${steps} steps of ~${cfg.optim.miniBatchSize} samples (${batchTokens} tokens), lr ${cfg.optim.lr} ${cfg.optim.schedule}`);
    const startedAt = performance.now();
    let slowest = 0;
    let end = Math.min(steps, opts.stopAfter !== undefined ? run.start + opts.stopAfter : steps);
    let lastStep: { step: number; metrics: Metrics } | null = null;
    // On a terminal a bar follows every step between the step lines; a log gets the step lines alone, one at least every PLAIN_EVERY_MS.
    const stepsPhase = run.progress.mode === 'bar' ? run.progress.phase('sft', steps - run.start) : null;
    let lastLine = -Infinity;
    const result = await trainSft(trainingView(model, params), samples, {
      steps,
      batchTokens,
      microBatchTokens: memory.microBatchTokens,
      lr: cfg.optim.lr,
      // trainSft decays by cosine; a cosine down to lr itself is the constant schedule.
      minLr: cfg.optim.schedule === 'constant' ? cfg.optim.lr : cfg.optim.minLr,
      warmupSteps: warmupIterations(cfg.optim, steps),
      weightDecay: cfg.optim.weightDecay,
      maxGradNorm: cfg.optim.gradClip > 0 ? cfg.optim.gradClip : Infinity,
      seed: cfg.seed,
      optimizer: adamw,
      startStep: run.start,
      onStep: async (s) => {
        const m = stepMetrics(s);
        lastStep = { step: s.step, metrics: m };
        slowest = Math.max(slowest, m['time/update']);
        if (opts.timeLimitSeconds !== undefined && s.step < end && (performance.now() - startedAt) / 1000 + slowest > opts.timeLimitSeconds) end = s.step;
        if (run.stopRequested) end = s.step;
        stepsPhase?.update(s.step - run.start, `loss ${s.loss.toFixed(4)}`);
        if (s.step === run.start + 1 || s.step % logEvery === 0 || s.step === s.steps || performance.now() - lastLine >= PLAIN_EVERY_MS) {
          lastLine = performance.now();
          const left = timeLeftText((performance.now() - startedAt) / 1000, s.step - run.start, end - run.start);
          run.progress.clear();
          log(`${formatSftStep(s)}${left ? ` | ${left}` : ''}`);
        }
        // The last step's row waits for the final validation, to share its row.
        if (s.step === steps) return;
        run.metrics.log(s.step, m);
        phases = new PhaseMemory(runtime());
        if (run.isDue(cfg.checkpoint.every, s.step, steps) || s.step === end) await save(s.step, m);
      },
      shouldStop: (s) => s.step >= end,
    });
    stepsPhase?.finish();
    const done = lastStep as { step: number; metrics: Metrics } | null;
    if (result.losses.length) log(`sft loss ${result.losses[0].toFixed(4)} -> ${result.losses[result.losses.length - 1].toFixed(4)} in ${result.seconds.toFixed(1)}s`);
    let last: Metrics = done?.metrics ?? {};
    if (done?.step === steps) {
      last = { ...done.metrics, ...(await validate(steps)) };
      run.metrics.log(steps, last);
      log(summaryLine(steps, steps, last));
      await save(steps, last);
    }
    const reached = done?.step ?? run.start;
    run.finish(reached, steps, 'steps');
    return { runDir: run.dir, iterations: reached, lastMetrics: last };
  } catch (e) {
    run.abandon();
    throw e;
  } finally {
    optimizer?.dispose();
    for (const p of [...model.parameters(), ...loraParameters(model)]) p.dispose();
    runtime().releaseCached();
  }
}
