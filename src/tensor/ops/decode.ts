// Inference-only fused ops of a decode step (models/qwen_decode.ts): several projections
// of the same rows in one dispatch, gate/up projections with SwiGLU, a projection with
// its residual connection, a plain projection, and rotary embedding with the KV-cache
// append. They record no gradient, so they refuse inputs that need one while gradients
// are enabled. The products run on the skinny matmul kernels, which read K as vec4s: K
// must be a multiple of 4. Their weights are f32 tensors or f16 copies (HalfWeight,
// tensor/ops/half.ts), all of one kind within a call.
//
// From rt.policy.decode.tensorMinRows rows on (a rollout's wide batch) the products run
// on tensor cores instead (decodeOnTensorCores): there the skinny kernels re-read each
// weight once per 8 rows, and a whole step's products are too small an output for the
// f32 tiles to fill the GPU. That path takes f16 copies, the q|k|v projections stacked
// as one weight, and norms as their own dispatches (they fold only for a few rows).

import type { Runtime } from '../../gpu/runtime.ts';
import { matmul } from '../../kernels/matmul/matmul.ts';
import { decodeRuns, matmulTensor, tensorMatmulAvailable } from '../../kernels/matmul/tensor.ts';
import { forward as swigluForward } from '../../kernels/swiglu.ts';
import { matmulSkinnyConcat, matmulSkinnyHalf, matmulSkinnySwiglu } from '../../kernels/matmul/skinny.ts';
import { SKINNY_TILE } from '../../kernels/matmul/tiles.ts';
import * as rk from '../../kernels/rope.ts';
import { recordsGradient } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt, numel, sameShape } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';
import { clone } from './create.ts';
import { isHalfWeight, type HalfWeight } from './half.ts';

/** A projection's weight [out, in]: f32, or its f16 copy. */
export type Weight = Tensor | HalfWeight;

const shapeOf = (w: Weight) => w.shape;
const bufferOf = (w: Weight) => (isHalfWeight(w) ? w.packed.buffer : w.buffer);

/** Whether `weights` are f16 copies; throws when they mix kinds. */
function halfWeights(op: string, weights: readonly Weight[]): boolean {
  const half = weights.map(isHalfWeight);
  if (half.some((h) => h !== half[0])) throw new ShapeError(`${op}: weights mix f32 tensors and f16 copies`);
  return half[0] ?? false;
}

/** The f32 tensors among `weights` (f16 copies carry no gradient). */
const f32Of = (weights: readonly Weight[]) => weights.filter((w): w is Tensor => !isHalfWeight(w));

function inferenceOnly(op: string, inputs: readonly (Tensor | null | undefined)[]): void {
  inputs.forEach((t, i) => {
    if (t) expectDType(op, `input ${i}`, t.dtype, 'f32');
  });
  if (recordsGradient(inputs)) throw new ShapeError(`${op}: inference only (records no gradient); run it under noGrad`);
}

/** Rows of x [..., in] and the checks every projection here shares. */
function rowsOf(op: string, x: Tensor, weights: readonly Weight[]): number {
  const inF = x.shape[x.rank - 1];
  // Built only for an error: decode steps run these checks hundreds of times a second.
  const what = () => `${op}: x ${fmt(x.shape)}, weights ${weights.map((w) => fmt(shapeOf(w))).join(' ')}`;
  if (x.rank < 1) throw new ShapeError(`${what()}: x needs a last dim`);
  for (const w of weights) {
    const s = shapeOf(w);
    if (s.length !== 2 || s[1] !== inF) throw new ShapeError(`${what()}: weights must be [out, ${inF}]`);
  }
  if (inF % 4 !== 0) throw new ShapeError(`${what()}: in = ${inF} must be a multiple of 4`);
  return numel(x.shape.slice(0, -1));
}

/**
 * Whether a fused decode product of `rows` rows runs on tensor cores (see the header):
 * from rt.policy.decode.tensorMinRows rows, on a device with f16 subgroup matrices,
 * unless its weight (of `weightElements`) is one that stays in L2
 * (policy.decode.fusedAnyRowsMaxBytes as f32), which the skinny kernels serve at any
 * row count: the bundled model's household rollout of 128 rows took 1.85 s on them
 * against 2.45 on tensor cores (H100, `dc6f980`). Without a weight, whether any can.
 */
export function decodeOnTensorCores(rt: Runtime, rows: number, weightElements = Infinity): boolean {
  const p = rt.policy.decode;
  return !rt.caps.compatibility && rt.policy.tensorCores.enabled && rows >= p.tensorMinRows && 4 * weightElements > p.fusedAnyRowsMaxBytes && tensorMatmulAvailable(rt);
}

const elementsOf = (w: Weight) => w.shape[0] * w.shape[1];

/** y = x @ w^T (+ bias) on tensor cores for `rows` rows, w an f16 copy; with `accumulate`, y += ... */
function tensorProduct(rt: Runtime, x: Tensor, w: HalfWeight, bias: Tensor | null, y: GPUBuffer, rows: number, accumulate = false): void {
  const [n, k] = w.shape;
  const runs = decodeRuns(rt, rows, n, k);
  matmulTensor(rt, { a: x.buffer, b: w.packed.buffer, halfB: true, bias: bias?.buffer, out: y, m: rows, n, k, transB: true, accumulate, runs });
}

/** The f16 copies a tensor-core product takes; an f32 weight there is refused. */
function halfOnly(op: string, weights: readonly Weight[]): HalfWeight[] {
  return weights.map((w) => {
    if (!isHalfWeight(w)) throw new ShapeError(`${op}: ${fmt(w.shape)} is an f32 weight; decode products on tensor cores read f16 copies (models/half_weights.ts)`);
    return w;
  });
}

/** The RMSNorm a fused projection applies to its input first: rmsNorm(x, weight, eps). */
export interface FoldedNorm {
  weight: Tensor;
  eps: number;
}

function checkNorm(op: string, x: Tensor, norm: FoldedNorm | undefined): void {
  const k = x.shape[x.rank - 1];
  if (norm && !sameShape(norm.weight.shape, [k])) throw new ShapeError(`${op}: norm weight ${fmt(norm.weight.shape)} must be [${k}]`);
}

/**
 * h @ [W_0; W_1; ...]^T + [b_0; b_1; ...]: up to three projections (a layer's q, k,
 * v) side by side in the last dim, [..., sum out_i], in one dispatch. h is x, or with
 * `norm` rmsNorm(x, ...) (needs kernels/matmul/skinny.ts skinnyConcatTakesNorm). Biases come for all
 * weights or none.
 */
export function linearConcat(x: Tensor, weights: readonly Weight[], biases: readonly Tensor[] | null = null, norm?: FoldedNorm): Tensor {
  const op = 'linearConcat';
  inferenceOnly(op, [x, ...f32Of(weights), ...(biases ?? []), norm?.weight]);
  const rows = rowsOf(op, x, weights);
  checkNorm(op, x, norm);
  if (weights.length < 1 || weights.length > 3) throw new ShapeError(`${op}: 1 to 3 weights, got ${weights.length}`);
  const half = halfWeights(op, weights);
  const ns = weights.map((w) => shapeOf(w)[0]);
  if (biases && (biases.length !== weights.length || biases.some((b, i) => b.rank !== 1 || b.shape[0] !== ns[i]))) {
    throw new ShapeError(`${op}: biases ${biases.map((b) => fmt(b.shape)).join(' ')} do not match weights of ${ns.join(', ')} rows`);
  }
  const rt = x.storage.rt;
  const y = empty([...x.shape.slice(0, -1), ns.reduce((s, n) => s + n, 0)], 'f32', rt);
  if (decodeOnTensorCores(rt, rows, elementsOf(weights[0]))) {
    if (weights.length !== 1 || norm) throw new ShapeError(`${op}: on tensor cores the projections come stacked as one weight and the norm unfolded`);
    tensorProduct(rt, x, halfOnly(op, weights)[0], biases?.[0] ?? null, y.buffer, rows);
    return y;
  }
  matmulSkinnyConcat(rt, {
    a: x.buffer, weights: weights.map(bufferOf), ns, biases: biases?.map((b) => b.buffer), out: y.buffer, m: rows, k: x.shape[x.rank - 1],
    norm: norm && { weight: norm.weight.buffer, eps: norm.eps }, half,
  });
  return y;
}

/**
 * silu(h @ gate^T) * (h @ up^T) in one dispatch; gate and up [out, in]. h is x, or
 * with `norm` rmsNorm(x, norm.weight, norm.eps) (the MLP's own norm, folded in).
 */
export function linearSwiglu(x: Tensor, gate: Weight, up: Weight, norm?: FoldedNorm): Tensor {
  const op = 'linearSwiglu';
  inferenceOnly(op, [x, ...f32Of([gate, up]), norm?.weight]);
  const rows = rowsOf(op, x, [gate, up]);
  const half = halfWeights(op, [gate, up]);
  if (!sameShape(gate.shape, up.shape)) throw new ShapeError(`${op}: gate ${fmt(gate.shape)} and up ${fmt(up.shape)} differ in shape`);
  checkNorm(op, x, norm);
  const k = x.shape[x.rank - 1];
  const rt = x.storage.rt;
  const n = gate.shape[0];
  const y = empty([...x.shape.slice(0, -1), n], 'f32', rt);
  if (decodeOnTensorCores(rt, rows, elementsOf(gate))) {
    if (norm) throw new ShapeError(`${op}: on tensor cores the norm runs unfolded`);
    const [g, u] = halfOnly(op, [gate, up]);
    const gated = rt.pool.acquire(4 * rows * n);
    const upped = rt.pool.acquire(4 * rows * n);
    tensorProduct(rt, x, g, null, gated, rows);
    tensorProduct(rt, x, u, null, upped, rows);
    swigluForward(rt, gated, upped, y.buffer, rows * n);
    rt.pool.release(gated);
    rt.pool.release(upped);
    return y;
  }
  matmulSkinnySwiglu(rt, {
    a: x.buffer, gate: bufferOf(gate), up: bufferOf(up), out: y.buffer, m: rows, n, k, norm: norm && { weight: norm.weight.buffer, eps: norm.eps }, half,
  });
  return y;
}

/**
 * residual + x @ weight^T (+ bias) in one dispatch; residual [..., out]. Into a new
 * tensor, or with `consume` where the caller reads the residual no more (a decode
 * step's residual stream), into the residual's own buffer where that saves work (on
 * tensor cores the product accumulates there), returning it.
 */
export function linearResidual(x: Tensor, weight: Weight, bias: Tensor | null, residual: Tensor, { consume = false } = {}): Tensor {
  return decodeProjection('linearResidual', x, weight, bias, residual, consume);
}

/** x @ weight^T for a decode step (its LM head): the skinny kernels, or tensor cores for many rows; into a new tensor. */
export function linearDecode(x: Tensor, weight: Weight): Tensor {
  return decodeProjection('linearDecode', x, weight, null, null, false);
}

function decodeProjection(op: string, x: Tensor, weight: Weight, bias: Tensor | null, residual: Tensor | null, consume: boolean): Tensor {
  inferenceOnly(op, [x, ...f32Of([weight]), bias, residual]);
  const rows = rowsOf(op, x, [weight]);
  const n = shapeOf(weight)[0];
  const shape = [...x.shape.slice(0, -1), n];
  if (residual && !sameShape(residual.shape, shape)) throw new ShapeError(`${op}: residual ${fmt(residual.shape)} must be ${fmt(shape)}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== n)) throw new ShapeError(`${op}: bias ${fmt(bias.shape)} must be [${n}]`);
  const rt = x.storage.rt;
  if (decodeOnTensorCores(rt, rows, elementsOf(weight))) {
    const [w] = halfOnly(op, [weight]);
    if (residual && consume) {
      tensorProduct(rt, x, w, bias, residual.buffer, rows, true);
      return residual;
    }
    const y = residual ? clone(residual) : empty(shape, 'f32', rt);
    tensorProduct(rt, x, w, bias, y.buffer, rows, !!residual);
    return y;
  }
  const y = empty(shape, 'f32', rt);
  const args = {
    a: x.buffer, b: bufferOf(weight), bias: bias?.buffer, residual: residual?.buffer, out: y.buffer,
    m: rows, n, k: x.shape[x.rank - 1], offsetA: 0, offsetB: 0, offsetC: 0, act: 'none' as const, accumulate: false,
  };
  if (isHalfWeight(weight)) matmulSkinnyHalf(rt, args);
  else matmul(rt, { ...args, transB: true, tile: SKINNY_TILE });
  return y;
}

export interface QkvCacheOptions {
  heads: number;
  kvHeads: number;
  headDim: number;
  theta: number;
  /** Leading dims of each head that rotate; defaults to headDim. */
  rotaryDim?: number;
  /** Per-head RMSNorm weights [headDim] of q and k, applied before the rotation. */
  qkNorm?: { q: Tensor; k: Tensor; eps: number };
}

/**
 * From qkv [B, T, (heads + 2 kvHeads) * headDim] (linearConcat of q, k, v): rotates q
 * and k by `positions` [B, T] (see rope), writes k and v into the caches `keys`,
 * `values` [B, kvHeads, capacity, headDim] at token `offset`, and returns q
 * [B, heads, T, headDim].
 */
export function ropeQkvCache(qkv: Tensor, positions: Tensor, keys: Tensor, values: Tensor, offset: number, opts: QkvCacheOptions): Tensor {
  const op = 'ropeQkvCache';
  inferenceOnly(op, [qkv, keys, values, opts.qkNorm?.q, opts.qkNorm?.k]);
  expectDType(op, 'positions', positions.dtype, 'i32', 'u32');
  const { heads, kvHeads, headDim: hd } = opts;
  const rotaryDim = opts.rotaryDim ?? hd;
  const what = () => `${op}: qkv ${fmt(qkv.shape)}, positions ${fmt(positions.shape)}, cache ${fmt(keys.shape)}`;
  if (qkv.rank !== 3 || qkv.shape[2] !== (heads + 2 * kvHeads) * hd) throw new ShapeError(`${what()}: qkv must be [B, T, ${(heads + 2 * kvHeads) * hd}]`);
  const [b, t] = qkv.shape;
  if (positions.rank !== 2 || positions.shape[0] !== b || positions.shape[1] !== t) throw new ShapeError(`${what()}: positions must be [${b}, ${t}]`);
  const cache = [b, kvHeads, keys.shape[2], hd];
  if (!sameShape(keys.shape, cache) || !sameShape(values.shape, cache)) throw new ShapeError(`${what()}: caches must both be [${b}, ${kvHeads}, capacity, ${hd}], values are ${fmt(values.shape)}`);
  if (!Number.isInteger(offset) || offset < 0 || offset + t > keys.shape[2]) throw new ShapeError(`${what()}: tokens ${offset}..${offset + t} do not fit the cache`);
  if (!Number.isInteger(rotaryDim) || rotaryDim < 2 || rotaryDim % 2 !== 0 || rotaryDim > hd) throw new ShapeError(`${what()}: rotaryDim ${rotaryDim} must be even and in [2, ${hd}]`);
  if (!(opts.theta > 0)) throw new RangeError(`${op}: theta must be positive, got ${opts.theta}`);
  const norm = opts.qkNorm;
  if (norm && (!sameShape(norm.q.shape, [hd]) || !sameShape(norm.k.shape, [hd]))) throw new ShapeError(`${what()}: q/k-norm weights must be [${hd}]`);
  const rt = qkv.storage.rt;
  const q = empty([b, heads, t, hd], 'f32', rt);
  rk.ropeQkvCache(rt, {
    b, t, hq: heads, hkv: kvHeads, hd, rotaryDim, theta: opts.theta, capacity: keys.shape[2], offset,
    qkNorm: norm ? { q: norm.q.buffer, k: norm.k.buffer, eps: norm.eps } : null,
  }, qkv.buffer, positions.buffer, q.buffer, keys.buffer, values.buffer);
  return q;
}
