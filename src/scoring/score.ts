// Per-token log-probs of given token sequences: the numbers the trainer optimises and
// the `score` command prints. Sequences of different lengths share one left-padded
// batch; position t's hidden state scores token t + 1. Sequences that continue shared
// prefixes (shared_prefix.ts) share a right-padded batch after them instead, the
// prefixes run once (CausalLM.hiddenAfterPrefixes).

import type { CausalLM } from '../models/causal_lm.ts';
import type { PrefixBatch } from '../models/token_batch.ts';
import { noGrad } from '../tensor/autograd.ts';
import { embedding, reshape, slice, tokenLogprobs } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';
import { ShapeError } from '../tensor/errors.ts';
import { planSharedPrefixes, type PlannedBatch } from './shared_prefix.ts';
import type { ScoringPolicy } from '../gpu/kernel_policy.ts';
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
 * Right-pads sequences into one batch: the rows that continue shared prefixes
 * (packedLogprobs' `prefixes`), whose padding after their last token no earlier position
 * attends to. padLeft is all zeros.
 */
export const packRight = (seqs: readonly ArrayLike<number>[]): PackedBatch => pack(seqs, 'right');

/** Prefixes left-padded into one batch, with the prefix (index into `prefixes`) each row continues. */
export function packPrefixes(prefixes: readonly ArrayLike<number>[], of: ArrayLike<number>): PrefixBatch {
  if (!prefixes.length) throw new ShapeError('packPrefixes: no prefixes');
  const seq = Math.max(...prefixes.map((p) => p.length));
  const ids = new Int32Array(prefixes.length * seq);
  const padLeft = new Int32Array(prefixes.length);
  prefixes.forEach((p, g) => {
    if (p.length === 0) throw new ShapeError(`packPrefixes: prefix ${g} is empty`);
    padLeft[g] = seq - p.length;
    for (let i = 0; i < p.length; i++) ids[g * seq + padLeft[g] + i] = p[i];
  });
  return { ids, batch: prefixes.length, seq, padLeft, of: Int32Array.from(of) };
}

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
  model: CausalLM, p: PackedBatch, opts: { temperature?: number; withEntropy?: boolean; positions?: Int32Array; prefixes?: PrefixBatch } = {},
): { logprobs: Tensor; entropy?: Tensor } {
  const hidden = opts.prefixes ? model.hiddenAfterPrefixes(opts.prefixes, p) : model.hidden({ ids: p.ids, batch: p.batch, seq: p.seq, padLeft: p.padLeft });
  const used = reshape(slice(hidden, 1, 0, p.seq - 1), [p.batch * (p.seq - 1), model.config.hidden]);
  const lm = { temperature: opts.temperature, withEntropy: opts.withEntropy };
  if (!opts.positions) return tokenLogprobs(used, model.lmHead(), p.targets, lm);
  // Only these positions go through the LM head (forward and backward): in agent RL
  // the responses are a few percent of the packed tokens, and the head is a quarter
  // of a small Qwen's compute. The gather's backward scatters into the hidden states.
  const rows = embedding(used, opts.positions);
  return tokenLogprobs(rows, model.lmHead(), opts.positions.map((i) => p.targets[i]), lm);
}

/** Splits packed per-position values back into per-sequence arrays (tokens 1..n-1). */
export function unpack(p: PackedBatch, values: Float32Array): Float32Array[] {
  const out: Float32Array[] = [];
  for (let b = 0; b < p.batch; b++) out.push(values.slice(b * (p.seq - 1) + p.padLeft[b], (b + 1) * (p.seq - 1)));
  return out;
}

/**
 * Splits sequence indices into batches, longest first, each within `budget` padded
 * tokens (a batch holds at least one sequence): rows of similar lengths share a batch,
 * so little of it is padding.
 */
export function budgetBatches(indices: readonly number[], length: (i: number) => number, budget: number): number[][] {
  const order = [...indices].sort((a, b) => length(b) - length(a));
  const out: number[][] = [];
  let cur: number[] = [];
  for (const i of order) {
    if (cur.length && length(cur[0]) * (cur.length + 1) > budget) {
      out.push(cur);
      cur = [];
    }
    cur.push(i);
  }
  if (cur.length) out.push(cur);
  return out;
}

/** packedLogprobs of one batch without gradients, read back to the host. */
async function readLogprobs(model: CausalLM, packed: PackedBatch, opts: Parameters<typeof packedLogprobs>[2]): Promise<Float32Array> {
  return scopeAsync(async () => Float32Array.from(await noGrad(() => packedLogprobs(model, packed, opts).logprobs).toArray()));
}

/**
 * A planned batch's rows (indices into `seqs`) packed: whole and left-padded, or after
 * the prefixes they share, with each row's prefix length.
 */
export function packPlanned(seqs: readonly (readonly number[])[], b: PlannedBatch): { packed: PackedBatch; prefixes?: PrefixBatch; cut: number[] } {
  if (!b.prefixes) return { packed: packLeft(b.rows.map((i) => seqs[i])), cut: b.rows.map(() => 0) };
  const of: number[] = [];
  const heads: (readonly number[])[] = [];
  for (const p of b.prefixes) {
    heads.push(seqs[b.rows[of.length]].slice(0, p.length));
    for (let k = 0; k < p.rows; k++) of.push(heads.length - 1);
  }
  if (of.length !== b.rows.length) throw new ShapeError(`packPlanned: prefixes of ${of.length} rows for a batch of ${b.rows.length}`);
  const cut = of.map((g) => b.prefixes![g].length);
  const packed = packRight(b.rows.map((i, k) => seqs[i].slice(cut[k])));
  return { packed, prefixes: packPrefixes(heads, of), cut };
}

/**
 * Log-probs of each sequence's tokens from `from[i]` on (at least 1: the token before
 * scores it), batched by a token budget; sequences that begin alike run their common
 * beginning once where that pays (shared_prefix.ts), as the teacher pass does: what the
 * local engine's `score` answers for a frozen teacher, a completion's tokens after its
 * prompt.
 */
export async function scoreTails(
  model: CausalLM, seqs: readonly (readonly number[])[], from: readonly number[],
  opts: { maxBatchTokens?: number; temperature?: number; costs?: ScoringPolicy } = {},
): Promise<Float32Array[]> {
  if (from.length !== seqs.length) throw new ShapeError(`scoreTails: ${from.length} starts for ${seqs.length} sequences`);
  const budget = opts.maxBatchTokens ?? 8192;
  const plan = planSharedPrefixes(
    seqs, seqs.map((_, i) => i), from.map((f) => f - 1), budget, (ix) => budgetBatches(ix, (i) => seqs[i].length, budget), opts.costs ?? runtime().policy.scoring,
  );
  const results: Float32Array[] = new Array(seqs.length);
  for (const b of plan.batches) {
    const { packed, prefixes, cut } = packPlanned(seqs, b);
    const positions = spanPositions(packed, b.rows.map((i, k) => [{ start: from[i] - cut[k], length: seqs[i].length - from[i] }]));
    const values = await readLogprobs(model, packed, { positions, temperature: opts.temperature, prefixes });
    let at = 0;
    for (const i of b.rows) {
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
  for (const group of budgetBatches(seqs.map((_, i) => i), (i) => seqs[i].length, opts.maxBatchTokens ?? 8192)) {
    const packed = packLeft(group.map((k) => seqs[k]));
    const values = await readLogprobs(model, packed, opts);
    unpack(packed, values).forEach((v, g) => (results[group[g]] = v));
  }
  return results;
}
