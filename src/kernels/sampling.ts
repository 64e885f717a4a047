// Launchers for shaders/sampling.wgsl: next-token sampling per row of logits (with an
// optional top-n list of the row's most likely tokens), the same as one step of a
// decoding loop that keeps its rows' progress on the GPU, and log-prob + rank of given
// targets for a block of logits rows.

import type { Runtime } from '../gpu/runtime.ts';
import { gridRows, uniforms } from './launch.ts';

/** Bytes of one row's RowParams (temperature, top_p, top_k, u, top_n, padding). */
export const ROW_PARAMS_BYTES = 32;

export interface RowSampling {
  /** 0 (or below GREEDY_BELOW): greedy. */
  temperature: number;
  /** >= 1: off. */
  topP: number;
  /** <= 0 or >= vocab: off. */
  topK: number;
  /** Uniform in [0, 1) for the draw. */
  u: number;
  /** Most likely tokens to list with their log-probs (default 0: none). */
  topN?: number;
}

/** Temperatures below this sample greedily (vLLM's _SAMPLING_EPS): 1 / T would overflow f32 long before 0. */
export const GREEDY_BELOW = 1e-5;

/** Top-list slots per row for these rows: the largest topN, at most the vocabulary. */
export function topStride(rows: readonly { topN?: number }[], vocab: number): number {
  return Math.min(vocab, rows.reduce((most, r) => Math.max(most, r.topN ?? 0), 0));
}

/** The RowParams array the kernel reads, one 32-byte struct per row. */
export function packRowParams(rows: readonly RowSampling[], vocab: number): ArrayBuffer {
  const words = ROW_PARAMS_BYTES / 4;
  const buf = new ArrayBuffer(rows.length * ROW_PARAMS_BYTES);
  const f = new Float32Array(buf);
  const u = new Uint32Array(buf);
  rows.forEach((r, i) => {
    f[i * words] = r.temperature < GREEDY_BELOW ? 0 : r.temperature;
    f[i * words + 1] = r.topP;
    u[i * words + 2] = r.topK > 0 && r.topK < vocab ? r.topK : 0;
    f[i * words + 3] = r.u;
    u[i * words + 4] = Math.min(r.topN ?? 0, vocab);
  });
  return buf;
}

/**
 * Samples one token per row of `logits` [rows, vocab] with `rowParams` (packRowParams);
 * writes `out` [(3 + 2 * topStride) * rows] u32: ids, log-prob bits, candidate threshold
 * keys, then [rows, topStride] top ids and [rows, topStride] their log-prob bits.
 */
export function sampleRows(rt: Runtime, logits: GPUBuffer, rowParams: GPUBuffer, out: GPUBuffer, rows: number, vocab: number, topStride: number): void {
  const p = uniforms(8);
  p.u[0] = rows;
  p.u[1] = vocab;
  p.u[5] = topStride;
  rt.dispatch(rt.kernel('sampling', 'sample'), [logits, rowParams, out], p.u, gridRows(rows));
}

/** Bytes of one row's DecodeRow (sample_step). */
export const DECODE_ROW_BYTES = 48;
/** The u32 of a DecodeRow that says it is done. */
export const DONE_WORD = 10;

/** A decoding row's settings and progress, as sample_step keeps them. */
export interface DecodeRowState {
  temperature: number;
  topP: number;
  topK: number;
  topN?: number;
  /** The request's seed (a safe integer): draw t is util/random.ts uniformAt(seed, t). */
  seed: number;
  /** Tokens sampled so far. */
  produced: number;
  maxTokens: number;
  /** Ids that end the row once sampled (kept as its last token). */
  stopIds: readonly number[];
  done: boolean;
}

/**
 * The DecodeRow array (DECODE_ROW_BYTES a row) and the stop-id list the rows index
 * (at least one word, since a binding cannot be empty).
 */
export function packDecodeRows(rows: readonly DecodeRowState[], vocab: number): { rows: ArrayBuffer; stops: Uint32Array } {
  const words = DECODE_ROW_BYTES / 4;
  const buf = new ArrayBuffer(rows.length * DECODE_ROW_BYTES);
  const f = new Float32Array(buf);
  const u = new Uint32Array(buf);
  const stops = new Uint32Array(Math.max(1, rows.reduce((n, r) => n + r.stopIds.length, 0)));
  let at = 0;
  rows.forEach((r, i) => {
    const o = i * words;
    f[o] = r.temperature < GREEDY_BELOW ? 0 : r.temperature;
    f[o + 1] = r.topP;
    u[o + 2] = r.topK > 0 && r.topK < vocab ? r.topK : 0;
    u[o + 3] = Math.min(r.topN ?? 0, vocab);
    // The seed's words as util/random.ts splits it.
    u[o + 4] = r.seed >>> 0;
    u[o + 5] = Math.floor(r.seed / 2 ** 32) >>> 0;
    u[o + 6] = r.produced;
    u[o + 7] = r.maxTokens;
    u[o + 8] = at;
    u[o + 9] = r.stopIds.length;
    u[o + DONE_WORD] = Number(r.done);
    stops.set(r.stopIds, at);
    at += r.stopIds.length;
  });
  return { rows: buf, stops };
}

/** Where a sample_step writes: the step's slot of a record holding `slots` steps. */
export interface StepSlot {
  rows: number;
  vocab: number;
  topStride: number;
  /** The step's slot in the record [slots, 3 + 2 * topStride, rows]. */
  slot: number;
}

/** u32s of one step's results in a record: ids, log-prob bits, thresholds and the top lists. */
export const stepWords = (rows: number, topStride: number) => (3 + 2 * topStride) * rows;

/**
 * One decoding step (sample_step) for every row of `logits` [rows, vocab]: rows not
 * done sample with the uniform of their seed and count, their results go to slot
 * `s.slot` of `record`, their ids to `nextIds` [rows] i32, and `decodeRows` advances;
 * every row's position id in `positions` [rows] i32 grows by one.
 */
export function sampleStep(rt: Runtime, logits: GPUBuffer, decodeRows: GPUBuffer, record: GPUBuffer, stops: GPUBuffer, nextIds: GPUBuffer, positions: GPUBuffer, s: StepSlot): void {
  const p = uniforms(8);
  p.u[0] = s.rows;
  p.u[1] = s.vocab;
  p.u[5] = s.topStride;
  p.u[6] = s.slot * stepWords(s.rows, s.topStride);
  rt.dispatch(rt.kernel('sampling', 'sample_step'), [logits, decodeRows, record, stops, nextIds, positions], p.u, gridRows(s.rows));
}

export interface TokenStatsShape {
  /** Rows in this block of logits. */
  rows: number;
  vocab: number;
  /** The block's first row in `targets` and the output. */
  row0: number;
  /** Rows of the whole output. */
  total: number;
  /** 1 / temperature. */
  invT: number;
}

/**
 * Log-prob under softmax(logits * invT) and rank of targets[row0 + r] for each row r of
 * the block `logits` [rows, vocab]; `out` [2 * total] u32: log-prob bits, then ranks.
 */
export function tokenStats(rt: Runtime, logits: GPUBuffer, targets: GPUBuffer, out: GPUBuffer, s: TokenStatsShape): void {
  const p = uniforms(8);
  p.u[0] = s.rows;
  p.u[1] = s.vocab;
  p.u[2] = s.row0;
  p.u[3] = s.total;
  p.setF(4, s.invT);
  rt.dispatch(rt.kernel('sampling', 'token_stats'), [logits, targets, out], p.u, gridRows(s.rows));
}
