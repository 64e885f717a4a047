// Launchers for shaders/sampling.wgsl: next-token sampling per row of logits (with an
// optional top-n list of the row's most likely tokens), and log-prob + rank of given
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
export function topStride(rows: readonly RowSampling[], vocab: number): number {
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
  p.f[4] = s.invT;
  rt.dispatch(rt.kernel('sampling', 'token_stats'), [logits, targets, out], p.u, gridRows(s.rows));
}
