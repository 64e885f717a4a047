// Next-token sampling on the GPU: logits [batch, vocab] stay on the device and only
// the chosen ids, their log-probs and the candidate thresholds come back, in one read.

import * as sk from '../kernels/sampling.ts';
import type { RowSampling } from '../kernels/sampling.ts';
import { expectDType } from '../tensor/dtype.ts';
import { ShapeError } from '../tensor/errors.ts';
import { fmt } from '../tensor/shape.ts';
import { empty, tensor, type Tensor } from '../tensor/tensor.ts';

export type { RowSampling } from '../kernels/sampling.ts';

export interface SampledTokens {
  ids: Int32Array;
  /** Log-prob of each id under the unfiltered softmax(logits / T) (T = 1 for greedy rows). */
  logprobs: Float32Array;
  /** Candidate threshold keys (reference/sampling.ts floatKey): what survived top-k / top-p. */
  thresholds: Uint32Array;
}

function checkRow(r: RowSampling, i: number): void {
  const bad = (what: string) => new RangeError(`sampleNext: row ${i}: ${what}`);
  if (!Number.isFinite(r.temperature) || r.temperature < 0) throw bad(`temperature must be a finite number >= 0, got ${r.temperature}`);
  if (!(r.topP > 0 && r.topP <= 1)) throw bad(`top_p must be in (0, 1], got ${r.topP}`);
  if (!Number.isInteger(r.topK)) throw bad(`top_k must be an integer, got ${r.topK}`);
  if (!(r.u >= 0 && r.u < 1)) throw bad(`u must be in [0, 1), got ${r.u}`);
}

/** One token per row of `logits` [rows, vocab], each row with its own sampling settings and uniform. */
export async function sampleNext(logits: Tensor, rows: readonly RowSampling[]): Promise<SampledTokens> {
  const out = sampleOnDevice(logits, rows);
  try {
    return await readSampled(out);
  } finally {
    out.dispose();
  }
}

/**
 * The sampler's result left on the GPU: [3 * rows] u32 (ids, log-prob bits, threshold
 * keys), for a decoding loop that records the next step from `sampledIds` before
 * `readSampled` brings this one back.
 */
export function sampleOnDevice(logits: Tensor, rows: readonly RowSampling[]): Tensor {
  expectDType('sampleNext', 'logits', logits.dtype, 'f32');
  if (logits.rank !== 2 || logits.shape[1] === 0) throw new ShapeError(`sampleNext: logits ${fmt(logits.shape)} are not [rows, vocab]`);
  const [n, vocab] = logits.shape;
  if (rows.length !== n) throw new ShapeError(`sampleNext: ${rows.length} sampling rows for logits ${fmt(logits.shape)}`);
  rows.forEach(checkRow);
  const rt = logits.storage.rt;
  const out = empty([3 * n], 'u32', rt);
  if (n === 0) return out;
  const params = tensor(new Uint32Array(sk.packRowParams(rows, vocab)), [n * 4], 'u32', rt);
  sk.sampleRows(rt, logits.buffer, params.buffer, out.buffer, n, vocab);
  params.dispose();
  return out;
}

/** The sampled ids of `sampleOnDevice`'s result as an i32 [rows] tensor on the GPU. */
export function sampledIds(sampled: Tensor): Tensor {
  const n = sampled.size / 3;
  const ids = empty([n], 'i32', sampled.storage.rt);
  sampled.storage.rt.copy(sampled.buffer, 0, ids.buffer, 0, 4 * n);
  return ids;
}

/** Reads `sampleOnDevice`'s result back (the caller still owns and disposes it). */
export async function readSampled(sampled: Tensor): Promise<SampledTokens> {
  const n = sampled.size / 3;
  if (n === 0) return { ids: new Int32Array(0), logprobs: new Float32Array(0), thresholds: new Uint32Array(0) };
  const bytes = (await sampled.toArray()).buffer as ArrayBuffer;
  return {
    ids: new Int32Array(bytes, 0, n),
    logprobs: new Float32Array(bytes, 4 * n, n),
    thresholds: new Uint32Array(bytes, 8 * n, n),
  };
}
