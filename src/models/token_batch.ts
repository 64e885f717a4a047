// A forward pass's input (token ids in batch rows, left padding; or rows continuing
// prefixes they share), checked and turned into positions alike by every model class,
// and what the layers of one Qwen2/Qwen3 pass share (qwen.ts and its fused decode
// layers, qwen_decode.ts).

import type { KVCache } from './kv_cache.ts';
import { ShapeError } from '../tensor/errors.ts';
import type { HalfWeight } from '../tensor/ops/half.ts';
import { tensor, type Tensor } from '../tensor/tensor.ts';

/** What fused decode steps read in place of f32 parameters (models/half_weights.ts). */
export interface HalfWeightMap {
  /** The f16 copy of a weight by its Hugging Face name, or of a layer's q|k|v stacked (qwen_decode.ts stackedQkvNames). */
  get(name: string): HalfWeight | undefined;
  /** A layer's q|k|v biases stacked, f32, by the stacked name. */
  bias(name: string): Tensor | undefined;
}

export interface TokenBatch {
  /**
   * Token ids, row-major [batch, seq]; left padding holds any valid id. A decoding
   * step may pass the sampler's i32 ids still on the GPU (no gradient then).
   */
  ids: Int32Array | Tensor;
  batch: number;
  seq: number;
  /** Left-padding length per row (positions and attention skip the padding). */
  padLeft?: Int32Array;
  /** f16 copies of weights that fused decode steps read instead of the f32 parameters. */
  halfWeights?: HalfWeightMap;
  /**
   * The position ids [batch, seq] and left padding [batch] (i32) already on the GPU,
   * as a decoding loop keeps them between steps; they must be what padLeft and the
   * cache give (positionIds), which are otherwise uploaded for every pass.
   */
  onGpu?: { positions: Tensor; pad: Tensor };
}

/**
 * Prefixes that rows of a batch continue, each run once: left-padded [batch, seq]
 * (`batch` prefixes, `padLeft` their padding), and the prefix of each row. The rows
 * themselves (PrefixedRows) hold the tokens after their prefix, right-padded: padding
 * after a row's last token is seen by no earlier position.
 */
export interface PrefixBatch {
  ids: Int32Array;
  batch: number;
  seq: number;
  padLeft: Int32Array;
  /** The prefix each row continues. */
  of: Int32Array;
}

/** Rows after their prefixes (PrefixBatch): right-padded [batch, seq], ids on the host. */
export interface PrefixedRows {
  ids: Int32Array;
  batch: number;
  seq: number;
}

/** Checks prefixes against the rows continuing them; returns each row's left padding, its prefix's. */
export function checkPrefixBatch(p: PrefixBatch, rows: PrefixedRows): Int32Array {
  checkTokenBatch(p, 0);
  checkTokenBatch(rows, 0);
  if (p.of.length !== rows.batch) throw new ShapeError(`forward: ${p.of.length} prefix indices for ${rows.batch} rows`);
  return Int32Array.from(p.of, (g, i) => {
    if (!Number.isInteger(g) || g < 0 || g >= p.batch) throw new ShapeError(`forward: row ${i} continues prefix ${g}, not one of the ${p.batch}`);
    return p.padLeft[g];
  });
}

/**
 * What a layer needs besides the rows' own step to run rows after shared prefixes
 * (shared_prefix_pass.ts): the prefixes' own batch, positions and padding, and the
 * prefix of each row; the layer's input holds the prefixes' tokens, then the rows'.
 */
export interface SharedPrefixStep {
  batch: number;
  seq: number;
  positions: Tensor;
  pad: Tensor;
  of: Int32Array;
}

/** The rows' side of a shared-prefix pass: their batch, positions after their prefixes, and their prefixes' padding. */
export interface PrefixedRowStep {
  batch: number;
  seq: number;
  positions: Tensor;
  pad: Tensor;
}

/** A pass over rows after shared prefixes, as its layers see it: both sides. */
export interface SharedPrefixLayout {
  rows: PrefixedRowStep;
  prefixes: SharedPrefixStep;
}

/** What every layer of one forward pass shares. */
export interface LayerStep {
  batch: number;
  seq: number;
  /** Position ids [batch, seq] (i32). */
  positions: Tensor;
  /** Left padding [batch] (i32), when rows are padded. */
  pad?: Tensor;
  cache: KVCache | null;
  /** Tokens already in the cache (0 without one). */
  offset: number;
  /** The batch's f16 weight copies, for the fused decode layers. */
  halfWeights?: HalfWeightMap;
  /** The rows continue prefixes, which run in the same pass. */
  shared?: SharedPrefixLayout;
}

/**
 * Checks a token batch continuing `past` cached tokens: the id count and the left
 * padding, which must leave each row a token by the end of the batch; or, for a chunk
 * of a longer prefill into a cache of `capacity` tokens, by the end of the cache.
 */
export function checkTokenBatch(b: TokenBatch, past: number, capacity = past + b.seq): void {
  const count = b.ids instanceof Int32Array ? b.ids.length : b.ids.size;
  if (count !== b.batch * b.seq) throw new ShapeError(`forward: ${count} ids for batch ${b.batch} x seq ${b.seq}`);
  if (b.padLeft && b.padLeft.length !== b.batch) throw new ShapeError(`forward: padLeft has ${b.padLeft.length} rows, batch is ${b.batch}`);
  b.padLeft?.forEach((p, i) => {
    if (p < 0 || p >= capacity) throw new ShapeError(`forward: padLeft[${i}] = ${p} must be in [0, ${capacity})`);
  });
  if (b.onGpu) {
    const { positions, pad } = b.onGpu;
    if (positions.dtype !== 'i32' || positions.rank !== 2 || positions.shape[0] !== b.batch || positions.shape[1] !== b.seq || pad.dtype !== 'i32' || pad.rank !== 1 || pad.shape[0] !== b.batch) {
      throw new ShapeError(`forward: positions ${positions.dtype} [${positions.shape}] and pad ${pad.dtype} [${pad.shape}] on the GPU must be i32 [${b.batch}, ${b.seq}] and [${b.batch}]`);
    }
  }
}

/** The pass's position ids and left padding on the GPU: the batch's own, or uploaded. */
export function stepInputs(b: TokenBatch, offset: number): { positions: Tensor; pad: Tensor | undefined } {
  if (b.onGpu) return b.onGpu;
  return {
    positions: tensor(positionIds(b.batch, b.seq, b.padLeft, offset), [b.batch, b.seq], 'i32'),
    pad: b.padLeft ? tensor(b.padLeft, [b.batch], 'i32') : undefined,
  };
}

/** Position ids as HF computes them from a left-padded mask: cumsum(mask) - 1, clamped at 0. */
export function positionIds(batch: number, seq: number, padLeft?: Int32Array, offset = 0): Int32Array {
  const pos = new Int32Array(batch * seq);
  for (let b = 0; b < batch; b++) {
    const pad = padLeft?.[b] ?? 0;
    for (let t = 0; t < seq; t++) pos[b * seq + t] = Math.max(0, offset + t - pad);
  }
  return pos;
}
