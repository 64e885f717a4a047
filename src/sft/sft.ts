// Supervised fine-tuning on (prompt, response) token sequences: the mean negative
// log-likelihood of the response tokens, prompts in the context but out of the loss.
//
// One optimizer step takes the next samples of a seeded shuffle until their tokens
// reach `batchTokens`, sorts them by length and cuts them into left-padded
// micro-batches of at most `microBatchTokens` padded tokens. Every response token of
// the step weighs 1 / (the step's response tokens), so gradients accumulated over
// micro-batches add up to the gradient of the step's mean. AdamW, global grad-norm
// clipping (a step with a non-finite norm is skipped), linear warmup then cosine decay.

import { AdamW } from '../optim/adamw.ts';
import { clipGradNorm } from '../optim/clip.ts';
import { lrAt } from '../optim/schedule.ts';
import { Prng } from '../util/random.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { packedLogprobs, packLeft, responsePositions } from '../scoring/score.ts';
import { backward, noGrad, zeroGrad } from '../tensor/autograd.ts';
import { scale, sum } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';
import { tensor } from '../tensor/tensor.ts';

export interface SftSample {
  /** The chat-templated prompt, generation prompt included. */
  promptIds: readonly number[];
  /** The answer and its end-of-turn token: the only tokens in the loss. */
  responseIds: readonly number[];
}

export interface SftOptions {
  steps: number;
  /** Sequence tokens per optimizer step (sum of sample lengths). */
  batchTokens: number;
  /** Padded tokens (batch x longest sequence) per forward/backward pass; default batchTokens. */
  microBatchTokens?: number;
  lr: number;
  /** Where the cosine decay ends; default lr / 10. */
  minLr?: number;
  /** Default: a tenth of the steps, at most 100. */
  warmupSteps?: number;
  weightDecay?: number;
  maxGradNorm?: number;
  /** Seed of the sample shuffle. */
  seed?: number;
  /** Called after every step (awaited), e.g. to print progress or save a checkpoint. */
  onStep?: (s: SftStepStats) => void | Promise<void>;
  /** The optimizer to step, kept by the caller (to checkpoint and resume it); default: a fresh AdamW, disposed at the end. */
  optimizer?: AdamW;
  /** Steps already done (a resumed run): their batches are drawn and skipped, so the rest match an uninterrupted run. */
  startStep?: number;
  /** Asked after every step: true ends training there. */
  shouldStop?: (s: SftStepStats) => boolean;
}

export interface SftStepStats {
  /** 1-based. */
  step: number;
  steps: number;
  /** Mean NLL per response token of this step's samples, before the update. */
  loss: number;
  lr: number;
  gradNorm: number;
  /** The norm was not finite and the update was skipped. */
  skipped: boolean;
  sequences: number;
  responseTokens: number;
  /** Tokens the passes computed, padding included. */
  paddedTokens: number;
  microBatches: number;
  /** Since training started. */
  seconds: number;
  /** Padded tokens per second since training started. */
  tokensPerSecond: number;
}

export interface SftResult {
  /** Loss of each step. */
  losses: number[];
  stats: SftStepStats[];
  seconds: number;
}

function checkSamples(samples: readonly SftSample[]): void {
  if (samples.length === 0) throw new RangeError('trainSft: no samples');
  samples.forEach((s, i) => {
    if (s.promptIds.length === 0 || s.responseIds.length === 0) {
      throw new RangeError(`trainSft: sample ${i} has ${s.promptIds.length} prompt and ${s.responseIds.length} response tokens; both must be non-empty`);
    }
  });
}

function positiveInt(name: string, v: number): void {
  if (!(Number.isInteger(v) && v >= 1)) throw new RangeError(`trainSft: ${name} must be a positive integer, got ${v}`);
}

/** The full sequence of a sample: prompt then response. */
export function sampleIds(s: SftSample): number[] {
  return [...s.promptIds, ...s.responseIds];
}

/** Groups samples (sorted by length) into micro-batches whose padded size fits `budget`; a longer sample goes alone. */
export function microBatches(samples: readonly SftSample[], budget: number): SftSample[][] {
  const sorted = [...samples].sort((a, b) => a.promptIds.length + a.responseIds.length - (b.promptIds.length + b.responseIds.length));
  const out: SftSample[][] = [];
  let group: SftSample[] = [];
  for (const s of sorted) {
    const len = s.promptIds.length + s.responseIds.length;
    if (group.length > 0 && len * (group.length + 1) > budget) {
      out.push(group);
      group = [];
    }
    group.push(s);
  }
  if (group.length > 0) out.push(group);
  return out;
}

/** Draws steps' worth of samples from an endless seeded shuffle, one pass over the data at a time. */
class SampleStream {
  private order: number[] = [];
  private at = 0;
  private readonly rng: Prng;

  constructor(private readonly samples: readonly SftSample[], seed: number) {
    this.rng = new Prng(seed);
  }

  next(tokens: number): SftSample[] {
    const out: SftSample[] = [];
    let used = 0;
    for (;;) {
      if (this.at === this.order.length) {
        this.order = this.rng.shuffle(this.samples.map((_, i) => i));
        this.at = 0;
      }
      const s = this.samples[this.order[this.at]];
      const len = s.promptIds.length + s.responseIds.length;
      if (out.length > 0 && used + len > tokens) return out;
      out.push(s);
      used += len;
      this.at++;
    }
  }
}

/** Forward and backward of one micro-batch; returns its (weighted) loss. */
async function microStep(model: CausalLM, group: readonly SftSample[], weight: number): Promise<number> {
  return scopeAsync(async () => {
    const packed = packLeft(group.map(sampleIds));
    const { logprobs } = packedLogprobs(model, packed, { positions: responsePositions(packed, group) });
    const loss = scale(sum(logprobs), -weight);
    backward(loss);
    return (await loss.toArray())[0];
  });
}

export async function trainSft(model: CausalLM, samples: readonly SftSample[], opts: SftOptions): Promise<SftResult> {
  checkSamples(samples);
  positiveInt('steps', opts.steps);
  positiveInt('batchTokens', opts.batchTokens);
  const micro = opts.microBatchTokens ?? opts.batchTokens;
  positiveInt('microBatchTokens', micro);
  const warmupSteps = opts.warmupSteps ?? Math.min(100, Math.floor(opts.steps / 10));
  const schedule = {
    base: opts.lr, warmupSteps, kind: 'cosine' as const, totalSteps: Math.max(opts.steps, warmupSteps + 1), minLr: opts.minLr ?? opts.lr / 10,
  };
  lrAt(0, schedule); // throws on a bad schedule before any GPU work
  const params = model.parameters().filter((p) => p.requiresGrad);
  if (params.length === 0) throw new RangeError('trainSft: the model has no trainable parameters');
  const startStep = opts.startStep ?? 0;
  if (!(Number.isInteger(startStep) && startStep >= 0 && startStep <= opts.steps)) throw new RangeError(`trainSft: startStep must be an integer in [0, ${opts.steps}], got ${startStep}`);
  const optimizer = opts.optimizer ?? new AdamW(params, { lr: opts.lr, weightDecay: opts.weightDecay ?? 0.01 });
  const stream = new SampleStream(samples, opts.seed ?? 0);
  for (let step = 0; step < startStep; step++) stream.next(opts.batchTokens);
  const started = performance.now();
  const stats: SftStepStats[] = [];
  let allPadded = 0;
  try {
    for (let step = startStep; step < opts.steps; step++) {
      const batch = stream.next(opts.batchTokens);
      const responseTokens = batch.reduce((n, s) => n + s.responseIds.length, 0);
      const groups = microBatches(batch, micro);
      let loss = 0;
      let padded = 0;
      for (const group of groups) {
        loss += await microStep(model, group, 1 / responseTokens);
        padded += group.length * Math.max(...group.map((s) => s.promptIds.length + s.responseIds.length));
      }
      const lr = lrAt(step, schedule);
      const clip = await clipGradNorm(params, opts.maxGradNorm ?? 1);
      if (clip.finite) optimizer.step(lr, clip.scale);
      zeroGrad(params);
      allPadded += padded;
      const seconds = (performance.now() - started) / 1000;
      const s: SftStepStats = {
        step: step + 1, steps: opts.steps, loss, lr, gradNorm: clip.norm, skipped: !clip.finite, sequences: batch.length,
        responseTokens, paddedTokens: padded, microBatches: groups.length, seconds, tokensPerSecond: allPadded / seconds,
      };
      stats.push(s);
      await opts.onStep?.(s);
      if (opts.shouldStop?.(s)) break;
    }
  } finally {
    zeroGrad(params);
    if (!opts.optimizer) optimizer.dispose();
  }
  return { losses: stats.map((s) => s.loss), stats, seconds: (performance.now() - started) / 1000 };
}

/** Mean NLL per response token over `samples`, without gradients. */
export async function sftLoss(model: CausalLM, samples: readonly SftSample[], microBatchTokens = 8192): Promise<number> {
  checkSamples(samples);
  const total = samples.reduce((n, s) => n + s.responseIds.length, 0);
  let loss = 0;
  for (const group of microBatches(samples, microBatchTokens)) {
    loss += await scopeAsync(async () => {
      const packed = packLeft(group.map(sampleIds));
      const value = noGrad(() => {
        const { logprobs } = packedLogprobs(model, packed, { positions: responsePositions(packed, group) });
        return scale(sum(logprobs), -1 / total);
      });
      return (await value.toArray())[0];
    });
  }
  return loss;
}

/** One progress line for a step. */
export function formatSftStep(s: SftStepStats): string {
  return `sft step ${s.step}/${s.steps} loss ${s.loss.toFixed(4)} lr ${s.lr.toExponential(2)} grad ${s.gradNorm.toFixed(3)}` +
    `${s.skipped ? ' (skipped: non-finite)' : ''} seqs ${s.sequences} resp ${s.responseTokens} micro ${s.microBatches} ${s.seconds.toFixed(1)}s ${Math.round(s.tokensPerSecond)} tok/s`;
}
