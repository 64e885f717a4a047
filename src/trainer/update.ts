// The policy update of one iteration: old and reference log-probs, then one AdamW
// step per mini-batch, each split into micro-batches by a token budget with gradients
// accumulated across them (docs/ALGORITHMS.md §1). What is packed and scored is token
// sequences (rollout/turn_sequences.ts): a turn sample each, or the turns of an episode
// whose prompts only grow as one. Every response token of a mini-batch weighs
// 1/(response tokens of the mini-batch), so the loss is the mini-batch's token mean
// however the budget cuts it into micro-batches and however turns share sequences.

import { TRAINING_FORWARD, withPolicy, type ScoringPolicy } from '../gpu/kernel_policy.ts';
import { runtime } from '../gpu/runtime.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import type { PrefixBatch } from '../models/token_batch.ts';
import { budgetBatches, packPlanned, packedLogprobs, spanPositions, type PackedBatch } from '../scoring/score.ts';
import { planSharedPrefixes, type PlannedBatch } from '../scoring/shared_prefix.ts';
import type { AdamW } from '../optim/adamw.ts';
import { clipGradNorm } from '../optim/clip.ts';
import type { AuxLoss } from '../algos/plan.ts';
import { policyLoss, tokenMean, type PolicyLossConfig, type PolicyLossTerms } from '../algos/policy_loss.ts';
import { correcting, correctionWeights, type RolloutCorrection } from '../algos/rollout_correction.ts';
import { backward, noGrad, zeroGrad } from '../tensor/autograd.ts';
import { scope, scopeAsync } from '../tensor/scope.ts';
import { tensor, zeros, type Tensor } from '../tensor/tensor.ts';
import { abs, add, clamp, clone, concat, reshape, scale, sub } from '../tensor/ops/index.ts';
import type { StepSample } from '../rollout/sample.ts';
import type { TurnSequence } from '../rollout/turn_sequences.ts';

/** A turn's response in a micro-batch's compact per-token arrays. */
export interface Segment {
  /** The turn's sample. */
  sample: number;
  /** Where its response tokens start in the compact arrays. */
  start: number;
  length: number;
}

/**
 * A micro-batch: sequences packed left-padded, or right-padded after prefixes they
 * share, and the packed positions scoring their response tokens. Per-token values
 * (log-probs, advantages, weights) of a micro-batch are compact arrays over those
 * positions, sequence after sequence and turn after turn.
 */
export interface MicroBatch {
  /** Indices of its sequences. */
  sequences: number[];
  /** The prefixes its sequences continue, run once; packed then holds the rest of each, right-padded. */
  prefixes?: PrefixBatch;
  packed: PackedBatch;
  /** Flat packed positions of every response token, in compact order. */
  positions: Int32Array;
  /** Every turn it trains, in compact order. */
  segments: Segment[];
  responseTokens: number;
}

export function makeMicroBatch(sequences: readonly TurnSequence[], batch: PlannedBatch): MicroBatch {
  const { packed, prefixes, cut } = packPlanned(sequences.map((q) => q.ids), batch);
  const positions = spanPositions(packed, batch.rows.map((i, k) => sequences[i].turns.map((t) => ({ start: t.start - cut[k], length: t.length }))));
  const segments: Segment[] = [];
  let at = 0;
  for (const i of batch.rows) {
    for (const t of sequences[i].turns) {
      segments.push({ sample: t.sample, start: at, length: t.length });
      at += t.length;
    }
  }
  return { sequences: batch.rows, ...(prefixes ? { prefixes } : {}), packed, positions, segments, responseTokens: positions.length };
}

/**
 * Splits sequence indices into micro-batches of at most `budget` padded tokens (longest
 * first). Sequences without response tokens (an engine may return none) have nothing to
 * score or train and are left out.
 */
export function splitMicroBatches(sequences: readonly TurnSequence[], indices: readonly number[], budget: number): MicroBatch[] {
  return microBatchRows(sequences, indices, budget).map((rows) => makeMicroBatch(sequences, { rows }));
}

/** The sequences of each of splitMicroBatches' micro-batches. */
function microBatchRows(sequences: readonly TurnSequence[], indices: readonly number[], budget: number): number[][] {
  return budgetBatches(indices.filter((i) => sequences[i].responseTokens > 0), (i) => sequences[i].ids.length, budget);
}

/**
 * splitMicroBatches for a pass where sequences that begin alike
 * (scoring/shared_prefix.ts) run their common prefixes once, several prefixes to a
 * micro-batch, wherever that costs less than running them whole (`costs`). A
 * micro-batch's budget still counts every row's whole length, so it holds no more than
 * without the prefixes (the rows' keys and values span them). The position before a
 * turn's first response token scores it, so a prefix ends before the first turn's
 * prompt does. `indices` defaults to every sequence, `costs` to the runtime's policy.
 */
export function sharedPrefixMicroBatches(
  sequences: readonly TurnSequence[], budget: number,
  { costs = runtime().policy.scoring, indices = sequences.map((_, i) => i) }: { costs?: ScoringPolicy; indices?: readonly number[] } = {},
): { batches: MicroBatch[]; sharedTokens: number } {
  const scored = indices.filter((i) => sequences[i].responseTokens > 0);
  const limits = sequences.map((q) => (q.turns.length ? q.turns[0].start - 1 : 0));
  const plan = planSharedPrefixes(sequences.map((q) => q.ids), scored, limits, budget, (ix) => microBatchRows(sequences, ix, budget), costs);
  return { batches: plan.batches.map((b) => makeMicroBatch(sequences, b)), sharedTokens: plan.sharedTokens };
}

/**
 * The sequences in `order` cut into mini-batches of whole sequences, each closed once it
 * holds `size` turn samples or more. With one turn a sequence that is `size` samples a
 * mini-batch, verl's mini-batches over step samples; an episode's turns are never split
 * across two optimiser steps.
 */
export function miniBatches(sequences: readonly TurnSequence[], order: readonly number[], size: number): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  let turns = 0;
  for (const i of order) {
    cur.push(i);
    turns += sequences[i].turns.length;
    if (turns >= size) {
      out.push(cur);
      cur = [];
      turns = 0;
    }
  }
  if (cur.length) out.push(cur);
  return out;
}

/** The micro-batch's compact per-response-token array of `value(sample, token)`. */
function compactTokens(mb: MicroBatch, value: (sample: number, token: number) => number): Float32Array {
  const out = new Float32Array(mb.responseTokens);
  for (const seg of mb.segments) for (let j = 0; j < seg.length; j++) out[seg.start + j] = value(seg.sample, j);
  return out;
}

function gatherTokens(mb: MicroBatch, values: Float32Array, into: Float32Array[]): void {
  for (const seg of mb.segments) into[seg.sample] = values.slice(seg.start, seg.start + seg.length);
}

/**
 * Response-token log-probs of every sample under `model` (no gradients), scored in the
 * micro-batches' sequences. Every micro-batch is recorded before anything is read back,
 * in one readback at the end, so the GPU runs while the next micro-batch is encoded.
 * `asTraining`: with the kernels a training forward takes (TRAINING_FORWARD), for log-probs
 * the update's are divided by.
 */
export async function responseLogprobs(
  model: CausalLM, samples: readonly StepSample[], batches: readonly MicroBatch[], temperature = 1, { asTraining = false } = {},
): Promise<Float32Array[]> {
  const out = samples.map(() => new Float32Array(0));
  const record = () => batches.map((mb) => scope(() => noGrad(() => packedLogprobs(model, mb.packed, { positions: mb.positions, temperature, prefixes: mb.prefixes }).logprobs)));
  const parts = asTraining ? withPolicy(runtime().policy, TRAINING_FORWARD, record) : record();
  (await readTogether(parts)).forEach((values, k) => gatherTokens(batches[k], values, out));
  return out;
}

export interface UpdateMetrics {
  pgLoss: number;
  kl: number;
  entropy: number;
  clipFrac: number;
  gradNorm: number;
  skippedSteps: number;
  steps: number;
  trainedTokens: number;
  /** Prompt tokens run once for several sequences (sharedPrefixMicroBatches), over the mini-batches. */
  sharedPrefixTokens: number;
  /** The auxiliary term's statistics, averaged over optimizer steps like the losses. */
  aux: Record<string, number>;
}

export interface UpdateContext {
  model: CausalLM;
  optimizer: AdamW;
  params: readonly Tensor[];
  loss: PolicyLossConfig;
  gradClip: number;
  lr: number;
  miniBatchSize: number;
  microBatchTokens: number;
  /** Log-probs and entropy are of softmax(logits / temperature): the rollout's sampling temperature, as the reference scores them. */
  temperature: number;
  /** Shuffles sequence order for mini-batches (seeded, so resumed runs match). */
  shuffle: (n: number) => number[];
  /** Weighs the policy-gradient loss by the engine-trainer ratio (algorithm.rolloutCorrection); unset or off, uncorrected. */
  correction?: RolloutCorrection;
  /** Called after each micro-batch with the samples done so far, the optimizer steps taken and the steps of the update. */
  onProgress?: (samples: number, steps: number, totalSteps: number) => void;
}

export interface UpdateInputs {
  /** Per-token advantages of each sample (a per-sample A broadcast, or a method's transform of it). */
  advantages: Float32Array[];
  /**
   * lold of each sample's response tokens. With `oldFromFirstStep`, those of the first
   * mini-batch's samples are not given (any value) and the update writes them in.
   */
  oldLogprobs: Float32Array[];
  /**
   * The first mini-batch's old log-probs are its own forward's, detached: the update's
   * first step runs under the weights a separate old pass would have read, so its
   * importance weight is exactly 1 (TRL takes every old log-prob so when an iteration
   * makes one step) and that pass need not score those samples.
   */
  oldFromFirstStep?: boolean;
  /**
   * Where given (bypass: `oldLogprobs` are the engine's), the update writes the first
   * mini-batch's own forward log-probs, before its step, into these samples' entries:
   * the trainer's view of the rollout's tokens, for the mismatch metrics, at no extra pass.
   */
  firstForward?: Float32Array[];
  refLogprobs: Float32Array[] | null;
  /** lT of each sample's response tokens; needed by `aux`. */
  teacherLogprobs?: Float32Array[] | null;
  aux?: AuxLoss | null;
}

/** The temperature log-probs are scored at: the rollout's, or 1 for greedy rollouts (T = 0 has no distribution to score). */
export function scoringTemperature(rolloutTemperature: number): number {
  return rolloutTemperature > 0 ? rolloutTemperature : 1;
}

/** Broadcasts one advantage per sample to each of its response tokens. */
export function broadcastAdvantages(samples: readonly StepSample[], perSample: Float64Array): Float32Array[] {
  return samples.map((s, i) => new Float32Array(s.responseIds.length).fill(perSample[i]));
}

/** The update's mini-batches: sequence indices in a seeded shuffle (one draw of ctx.shuffle), cut by miniBatches. */
export function updateMiniBatches(ctx: UpdateContext, sequences: readonly TurnSequence[]): number[][] {
  return miniBatches(sequences, ctx.shuffle(sequences.length), ctx.miniBatchSize);
}

/** One pass over the sequences of the samples: one optimizer step per mini-batch of `minis` (updateMiniBatches). */
export async function policyUpdate(
  ctx: UpdateContext, samples: readonly StepSample[], sequences: readonly TurnSequence[], minis: readonly number[][], inputs: UpdateInputs,
): Promise<UpdateMetrics> {
  const { advantages, oldLogprobs, refLogprobs, teacherLogprobs, aux, oldFromFirstStep = false, firstForward } = inputs;
  if (aux && !teacherLogprobs) throw new Error('policyUpdate: an auxiliary term needs teacher log-probs');
  const m: UpdateMetrics = { pgLoss: 0, kl: 0, entropy: 0, clipFrac: 0, gradNorm: 0, skippedSteps: 0, steps: 0, trainedTokens: 0, sharedPrefixTokens: 0, aux: {} };
  let samplesDone = 0;
  for (const [index, mini] of minis.entries()) {
    const { batches: micro, sharedTokens } = sharedPrefixMicroBatches(sequences, ctx.microBatchTokens, { indices: mini });
    m.sharedPrefixTokens += sharedTokens;
    const miniTokens = micro.reduce((n, mb) => n + mb.responseTokens, 0);
    const ownOld = oldFromFirstStep && index === 0;
    // Where the first step's forward log-probs go once the mini-batch is read back: its
    // own lold (unless a correction read them before the backward), or firstForward.
    let keptForward: Float32Array[] | null = null;
    if (ownOld) keptForward = correcting(ctx.correction) ? null : oldLogprobs;
    else if (index === 0) keptForward = firstForward ?? null;
    zeroGrad(ctx.params);
    const rows: Tensor[] = [];
    const forwards: Tensor[] = [];
    let auxNames: string[] = [];
    for (const mb of micro) {
      const row = await scopeAsync(async () => {
        const w = 1 / miniTokens;
        const t = (f: (s: number, j: number) => number) => tensor(compactTokens(mb, f));
        const { logprobs, entropy } = packedLogprobs(ctx.model, mb.packed, { withEntropy: true, positions: mb.positions, temperature: ctx.temperature, prefixes: mb.prefixes });
        const weights = t(() => w);
        const oldT = ownOld ? noGrad(() => clone(logprobs)) : t((s, j) => oldLogprobs[s][j]);
        const correction = ctx.correction;
        let isWeights: Tensor | undefined;
        if (correcting(correction)) {
          // The correction's weights are formed on the host from lold, so lold from this forward is read back before the backward.
          if (ownOld) gatherTokens(mb, Float32Array.from(await oldT.toArray()), oldLogprobs);
          const bySample = new Map(mb.segments.map(({ sample }) => [sample, correctionWeights(oldLogprobs[sample], samples[sample].responseLogprobs, correction)]));
          isWeights = t((s, j) => bySample.get(s)![j]);
        }
        const terms = policyLoss({
          logprobs,
          entropy,
          oldLogprobs: oldT,
          refLogprobs: refLogprobs ? t((s, j) => refLogprobs[s][j]) : undefined,
          advantages: t((s, j) => advantages[s][j]),
          negativeMask: t((s, j) => (advantages[s][j] < 0 ? 1 : 0)),
          weights,
          correctionWeights: isWeights,
        }, ctx.loss);
        let loss = terms.loss;
        let auxStats: Record<string, Tensor> = {};
        if (aux) {
          const segments = mb.segments.map(({ start, length }) => ({ start, length }));
          const term = await aux({ logprobs, teacherLogprobs: t((s, j) => teacherLogprobs![s][j]), oldLogprobs: oldT, weights, segments });
          loss = add(loss, term.loss);
          auxStats = term.stats;
        }
        backward(loss);
        auxNames = Object.keys(auxStats);
        const forward = keptForward ? (ownOld ? oldT : noGrad(() => clone(logprobs))) : null;
        return { stats: statsRow(terms, weights, ctx.loss, auxNames.map((k) => auxStats[k])), forward };
      });
      rows.push(row.stats);
      if (row.forward) forwards.push(row.forward);
      // Buffers the budget made the pool destroy during this micro-batch free their memory before the next one allocates.
      await runtime().settle();
      m.trainedTokens += mb.responseTokens;
      ctx.onProgress?.((samplesDone += mb.segments.length), m.steps, minis.length);
    }
  const clip = await clipGradNorm(ctx.params, ctx.gradClip);
    const read = await readTogether([...rows, ...forwards]);
    const stats = read.slice(0, rows.length);
    read.slice(rows.length).forEach((values, k) => gatherTokens(micro[k], values, keptForward!));
    for (const r of stats) {
      m.pgLoss += r[0];
      m.kl += r[1];
      m.entropy += r[2];
      m.clipFrac += r[3];
      auxNames.forEach((k, i) => (m.aux[k] = (m.aux[k] ?? 0) + r[STAT_COLUMNS + i]));
    }
    m.gradNorm = clip.norm;
    if (clip.finite) ctx.optimizer.step(ctx.lr, clip.scale);
    else m.skippedSteps++;
    m.steps++;
    zeroGrad(ctx.params);
  }
  // A mini-batch's rows sum to its token means; the reported values average the mini-batches.
  const perStep = Math.max(m.steps, 1);
  const auxMeans = Object.fromEntries(Object.entries(m.aux).map(([k, v]) => [k, v / perStep]));
  return { ...m, pgLoss: m.pgLoss / perStep, kl: m.kl / perStep, entropy: m.entropy / perStep, clipFrac: m.clipFrac / perStep, aux: auxMeans };
}

const STAT_COLUMNS = 4;

/**
 * A micro-batch's share of the mini-batch statistics as one small GPU tensor: [pg,
 * kl, entropy, clip fraction, ...aux], each a weighted sum over its tokens, so the
 * rows of a mini-batch add up to its token means. They are read together after the
 * mini-batch's micro-batches are recorded, since a readback per micro-batch would
 * leave the GPU idle while the next one is encoded.
 */
export function statsRow(terms: PolicyLossTerms, weights: Tensor, cfg: PolicyLossConfig, aux: readonly Tensor[]): Tensor {
  return noGrad(() => {
    // 1 where the ratio lies outside [1 - clipLow, 1 + clipHigh], 0 inside or on the edge,
    // from the distance to its clamped value (there is no comparison op).
    const outside = clamp(scale(abs(sub(terms.ratio, clamp(terms.ratio, 1 - cfg.clipLow, 1 + cfg.clipHigh))), 1e30), 0, 1);
    const clipFrac = tokenMean(outside, weights);
    const scalars = [terms.pg, terms.kl, terms.entropy, clipFrac, ...aux].map((x) => (x ? reshape(x, [1]) : zeros([1])));
    return concat(scalars, 0);
  });
}

/** The values of 1-D tensors (disposed after) in one readback rather than one each. */
async function readTogether(parts: readonly Tensor[]): Promise<Float32Array[]> {
  if (parts.length === 0) return [];
  const all = await scopeAsync(async () => Float32Array.from(await noGrad(() => concat(parts, 0)).toArray()));
  let at = 0;
  return parts.map((t) => {
    const values = all.subarray(at, (at += t.size));
    t.dispose();
    return values;
  });
}
