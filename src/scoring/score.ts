// Per-token log-probs of given token sequences: the numbers the trainer optimises and
// the `score` command prints. Sequences of different lengths share one left-padded
// batch; position t's hidden state scores token t + 1. Sequences that continue one
// shared prefix (shared_prefix.ts) share a right-padded batch after it instead.

import type { CausalLM } from '../models/causal_lm.ts';
import { isGradEnabled, noGrad } from '../tensor/autograd.ts';
import { embedding, reshape, slice, tokenLogprobs } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';
import { ShapeError } from '../tensor/errors.ts';
import { groupOverhead, groupsThatPay, sharedPrefixGroups } from './shared_prefix.ts';
import type { ScoringCosts } from '../gpu/kernel_policy.ts';
import { runtime } from '../gpu/runtime.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface PackedBatch {
  ids: Int32Array;
  batch: number;
  seq: number;
  padLeft: Int32Array;
  /** Next-token targets [batch * (seq - 1)], 0 where the position is padding. */
  targets: Int32Array;
}

/** Left-pads sequences into one batch. */
export const packLeft = (seqs: readonly ArrayLike<number>[]): PackedBatch => pack(seqs, 'left');

/**
 * Right-pads sequences into one batch: the rows that continue a shared prefix
 * (packedLogprobs' `prefix`), whose padding after their last token no earlier position
 * attends to. padLeft is all zeros.
 */
export const packRight = (seqs: readonly ArrayLike<number>[]): PackedBatch => pack(seqs, 'right');

function pack(seqs: readonly ArrayLike<number>[], side: 'left' | 'right'): PackedBatch {
  const name = side === 'left' ? 'packLeft' : 'packRight';
  if (!seqs.length) throw new ShapeError(`${name}: no sequences`);
  const T = Math.max(...seqs.map((s) => s.length));
  if (T < 2) throw new ShapeError(`${name}: sequences need at least 2 tokens to score`);
  const B = seqs.length;
  const ids = new Int32Array(B * T);
  const padLeft = new Int32Array(B);
  const targets = new Int32Array(B * (T - 1));
  seqs.forEach((s, b) => {
    if (s.length === 0) throw new ShapeError(`${name}: sequence ${b} is empty`);
    const pad = side === 'left' ? T - s.length : 0;
    padLeft[b] = pad;
    for (let i = 0; i < s.length; i++) ids[b * T + pad + i] = s[i];
    for (let t = pad; t < pad + s.length - 1; t++) targets[b * (T - 1) + t] = ids[b * T + t + 1];
  });
  return { ids, batch: B, seq: T, padLeft, targets };
}

/**
 * The packed positions [batch * (seq - 1)] scoring each row's response tokens, row after
 * row (row b packs prompt then response of `parts[b]`). Position t scores token t + 1,
 * so a row's response is scored from one before its first token.
 */
export function responsePositions(p: PackedBatch, parts: readonly { promptIds: ArrayLike<number>; responseIds: ArrayLike<number> }[]): Int32Array {
  return spanPositions(p, parts.map((s) => [{ start: s.promptIds.length, length: s.responseIds.length }]));
}

/**
 * The packed positions scoring spans of each row's tokens (`start`: the span's first
 * token in the unpadded row), row after row and span after span: a row holding several
 * turns of an episode scores each turn's response where it sits.
 */
export function spanPositions(p: PackedBatch, rows: readonly (readonly { start: number; length: number }[])[]): Int32Array {
  if (rows.length !== p.batch) throw new ShapeError(`spanPositions: ${rows.length} rows of spans for a batch of ${p.batch}`);
  const out = new Int32Array(rows.reduce((n, spans) => n + spans.reduce((m, s) => m + s.length, 0), 0));
  let at = 0;
  rows.forEach((spans, b) => {
    const rowLength = p.seq - p.padLeft[b];
    for (const { start, length } of spans) {
      if (length > 0 && (start < 1 || start + length > rowLength)) throw new ShapeError(`spanPositions: span [${start}, ${start + length}) of row ${b} is not inside its ${rowLength} tokens after the first`);
      const first = b * (p.seq - 1) + p.padLeft[b] + start - 1;
      for (let j = 0; j < length; j++) out[at++] = first + j;
    }
  });
  return out;
}

/**
 * Log-probs (and entropies) [batch * (seq - 1)] of each packed position's next token,
 * differentiable when gradients are on. Padding positions hold junk; use `unpack`.
 * With `positions` (flat indices into those), only theirs, in that order.
 */
export function packedLogprobs(
  model: CausalLM, p: PackedBatch, opts: { temperature?: number; withEntropy?: boolean; positions?: Int32Array; prefix?: ArrayLike<number> } = {},
): { logprobs: Tensor; entropy?: Tensor } {
  const hidden = opts.prefix?.length ? hiddenAfter(model, opts.prefix, p) : model.hidden({ ids: p.ids, batch: p.batch, seq: p.seq, padLeft: p.padLeft });
  const used = reshape(slice(hidden, 1, 0, p.seq - 1), [p.batch * (p.seq - 1), model.config.hidden]);
  const lm = { temperature: opts.temperature, withEntropy: opts.withEntropy };
  if (!opts.positions) return tokenLogprobs(used, model.lmHead(), p.targets, lm);
  // Only these positions go through the LM head (forward and backward): in agent RL
  // the responses are a few percent of the packed tokens, and the head is a quarter
  // of a small Qwen's compute. The gather's backward scatters into the hidden states.
  const rows = embedding(used, opts.positions);
  return tokenLogprobs(rows, model.lmHead(), opts.positions.map((i) => p.targets[i]), lm);
}

/**
 * Hidden states of `p`'s rows (packRight), each continuing `prefix`: the prefix runs
 * once, into a cache of one row, and every row attends to a copy of its keys and
 * values. Scoring passes only: the cache records no gradient.
 */
function hiddenAfter(model: CausalLM, prefix: ArrayLike<number>, p: PackedBatch): Tensor {
  if (isGradEnabled()) throw new Error('packedLogprobs: a shared prefix is for scoring passes without gradients');
  const one = model.newCache(1, prefix.length + p.seq);
  model.hiddenCached({ ids: Int32Array.from(prefix), batch: 1, seq: prefix.length }, one);
  const rows = one.takeRows(new Array<number>(p.batch).fill(0));
  one.dispose();
  try {
    return model.hiddenCached({ ids: p.ids, batch: p.batch, seq: p.seq }, rows);
  } finally {
    rows.dispose();
  }
}

/** Splits packed per-position values back into per-sequence arrays (tokens 1..n-1). */
export function unpack(p: PackedBatch, values: Float32Array): Float32Array[] {
  const out: Float32Array[] = [];
  for (let b = 0; b < p.batch; b++) out.push(values.slice(b * (p.seq - 1) + p.padLeft[b], (b + 1) * (p.seq - 1)));
  return out;
}

/**
 * Splits sequence indices into batches, shortest first, each within `budget` padded
 * tokens (a batch holds at least one sequence).
 */
export function budgetGroups(indices: readonly number[], seqs: readonly ArrayLike<number>[], budget: number): number[][] {
  const order = [...indices].sort((a, b) => seqs[a].length - seqs[b].length);
  const groups: number[][] = [];
  let i = 0;
  while (i < order.length) {
    let j = i + 1;
    while (j < order.length && seqs[order[j]].length * (j - i + 1) <= budget) j++;
    groups.push(order.slice(i, j));
    i = j;
  }
  return groups;
}

/** packedLogprobs of one batch without gradients, read back to the host. */
async function readLogprobs(model: CausalLM, packed: PackedBatch, opts: Parameters<typeof packedLogprobs>[2]): Promise<Float32Array> {
  return scopeAsync(async () => Float32Array.from(await noGrad(() => packedLogprobs(model, packed, opts).logprobs).toArray()));
}

/**
 * Log-probs of each sequence's tokens from `from[i]` on (at least 1: the token before
 * scores it), batched by a token budget; sequences that begin alike run their common
 * beginning once (shared_prefix.ts), as the teacher pass does: what the local engine's
 * `score` answers for a frozen teacher, a completion's tokens after its prompt.
 */
export async function scoreTails(
  model: CausalLM, seqs: readonly (readonly number[])[], from: readonly number[],
  opts: { maxBatchTokens?: number; temperature?: number; costs?: ScoringCosts } = {},
): Promise<Float32Array[]> {
  if (from.length !== seqs.length) throw new ShapeError(`scoreTails: ${from.length} starts for ${seqs.length} sequences`);
  const budget = opts.maxBatchTokens ?? 8192;
  const costs = opts.costs ?? runtime().policy.scoring;
  const { groups, alone } = groupsThatPay(
    sharedPrefixGroups(seqs, seqs.map((_, i) => i), from.map((f) => f - 1), groupOverhead(costs)),
    seqs.map((s) => s.length), budget, (members) => budgetGroups(members, seqs, budget), costs,
  );
  const batches = [
    ...groups.flatMap((g) => g.batches.map((rows) => ({ rows, prefix: g.prefix }))),
    ...budgetGroups(alone, seqs, budget).map((rows) => ({ rows, prefix: 0 })),
  ];
  const results: Float32Array[] = new Array(seqs.length);
  for (const { rows, prefix } of batches) {
    const packed = prefix ? packRight(rows.map((i) => seqs[i].slice(prefix))) : packLeft(rows.map((i) => seqs[i]));
    const positions = spanPositions(packed, rows.map((i) => [{ start: from[i] - prefix, length: seqs[i].length - from[i] }]));
    const shared = prefix ? seqs[rows[0]].slice(0, prefix) : undefined;
    const values = await readLogprobs(model, packed, { positions, temperature: opts.temperature, prefix: shared });
    let at = 0;
    for (const i of rows) {
      const n = seqs[i].length - from[i];
      results[i] = values.slice(at, at + n);
      at += n;
    }
  }
  return results;
}

/** Log-probs of tokens 1..n-1 of each sequence, batched by a token budget. */
export async function scoreSequences(model: CausalLM, seqs: readonly ArrayLike<number>[], opts: { maxBatchTokens?: number; temperature?: number } = {}): Promise<Float32Array[]> {
  const results: Float32Array[] = new Array(seqs.length);
  for (const group of budgetGroups(seqs.map((_, i) => i), seqs, opts.maxBatchTokens ?? 8192)) {
    const packed = packLeft(group.map((k) => seqs[k]));
    const values = await readLogprobs(model, packed, opts);
    unpack(packed, values).forEach((v, g) => (results[group[g]] = v));
  }
  return results;
}
