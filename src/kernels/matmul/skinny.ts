// Launchers of the skinny kernels (shaders/matmul/skinny.wgsl): a few rows by a
// weight stored [N, K], a decode step's products, with a decode layer's neighbouring
// operations (residual, several projections at once, RMSNorm, SwiGLU) folded in. Each
// takes its weights as f32 or, with `half`, as f16 pairs (u32 [N, K / 2], element 2j
// in the low half of word j; shaders/matmul/skinny_f16.wgsl).

import { GpuError } from '../../device/errors.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { grid1d, uniforms } from '../launch.ts';
import { checkBuffer, isCount, MATMUL_ACTS, type MatmulArgs } from './args.ts';

/** Whether the skinny kernel can compute this product (see tiles.ts SKINNY_TILE). */
export function skinnyFits(args: Pick<MatmulArgs, 'k' | 'batch' | 'transA' | 'transB' | 'offsetA' | 'offsetB'>): boolean {
  return !!args.transB && !args.transA && (args.batch ?? 1) === 1 && args.k % 4 === 0 && (args.offsetA ?? 0) % 4 === 0 && (args.offsetB ?? 0) % 4 === 0;
}

export type SkinnyArgs = Required<Pick<MatmulArgs, 'a' | 'b' | 'out' | 'm' | 'n' | 'k' | 'offsetA' | 'offsetB' | 'offsetC' | 'act' | 'accumulate'>> & Pick<MatmulArgs, 'bias' | 'residual'> & {
  /** B holds f16 pairs (offsetB still counts elements, a multiple of 4). */
  half?: boolean;
};

/** The kernel family of weights stored as f32 or as f16 pairs. */
const family = (half: boolean | undefined) => (half ? 'matmul/skinny_f16' : 'matmul/skinny');

/** Words of a weight of `elements` values: f32 or f16 pairs. */
const weightWords = (elements: number, half: boolean | undefined) => (half ? elements / 2 : elements);

/**
 * Rows of A per skinny workgroup (SKINNY_ROWS in the shader, at most SKINNY_MAX_ROWS):
 * B is read once per this many. 16 rows read the weights half as often, but on the
 * H200 batch-32 decoding fell from 2,776 to 1,931 tokens/s with them (twice the
 * accumulators and workgroup memory per lane; skinny_swiglu took 114 us a call), so 8.
 */
const skinnyRows = (m: number) => (m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8);

export function matmulSkinny(rt: Runtime, r: SkinnyArgs): void {
  const rows = skinnyRows(r.m);
  const kernel = rt.kernel(family(r.half), 'skinny', {
    SKINNY_ROWS: rows, BIAS: Number(!!r.bias), ACT: MATMUL_ACTS[r.act], ACCUM: Number(r.accumulate), RESID: Number(!!r.residual),
  });
  // 8 columns per workgroup (SKINNY_COLS).
  const [gx, gy] = grid1d(r.n, 8);
  const p = uniforms(13);
  p.u.set([r.m, r.n, r.k, 0, 0, 0, 0, 0, gx, r.offsetA, r.offsetB, r.offsetC, 0]);
  // Without a bias or residual the bindings still need a buffer; A is read-only already.
  rt.dispatch(kernel, [r.a, r.b, r.bias ?? r.a, r.out, r.residual ?? r.a], p.u, [Math.ceil(r.m / rows), gx, gy]);
}

/**
 * A skinny product with B as f16 pairs, checked as `matmul` checks the f32 ones it
 * routes here (the f32 path always goes through matmul).
 */
export function matmulSkinnyHalf(rt: Runtime, r: Omit<SkinnyArgs, 'half'>): void {
  const what = 'matmul (skinny f16)';
  checkSkinny(what, r.m, r.k);
  if (!isCount(r.n)) throw new GpuError(`${what}: n = ${r.n} is not a count`);
  if (r.offsetA % 4 !== 0 || r.offsetB % 4 !== 0) throw new GpuError(`${what}: offsetA ${r.offsetA} and offsetB ${r.offsetB} must be multiples of 4`);
  if (r.m === 0 || r.n === 0) return;
  checkBuffer('A', r.a, r.offsetA + r.m * r.k);
  checkBuffer('B', r.b, (r.offsetB + r.n * r.k) / 2);
  checkBuffer('C', r.out, r.offsetC + r.m * r.n);
  if (r.bias) checkBuffer('bias', r.bias, r.n);
  if (r.residual) checkBuffer('residual', r.residual, r.offsetC + r.m * r.n);
  matmulSkinny(rt, { ...r, half: true });
}

/** The skinny variants' uniform (SkinnyParams) and grid for an m x n output. */
function skinnyLaunch(m: number, n: number, k: number, n0 = 0, n1 = 0, eps = 0): { params: Uint32Array; grid: [number, number, number] } {
  const [gx, gy] = grid1d(n, 8);
  const p = uniforms(7);
  p.u.set([m, n, k, gx, n0, n1]);
  p.setF(6, eps);
  return { params: p.u, grid: [Math.ceil(m / skinnyRows(m)), gx, gy] };
}

/** A folded RMSNorm (skinny_concat_norm, skinny_swiglu's NORM_A) and its epsilon. */
export interface SkinnyNorm {
  /** [k] */
  weight: GPUBuffer;
  eps: number;
}

function checkNormEps(what: string, norm: SkinnyNorm | undefined): void {
  if (norm && !(norm.eps >= 0 && Number.isFinite(norm.eps))) throw new GpuError(`${what}: eps = ${norm.eps} must be a finite number >= 0`);
}

function checkSkinny(what: string, m: number, k: number): void {
  if (!isCount(m)) throw new GpuError(`${what}: m = ${m} is not a count`);
  if (!isCount(k)) throw new GpuError(`${what}: k = ${k} is not a count`);
  if (k % 4 !== 0) throw new GpuError(`${what}: k = ${k} must be a multiple of 4 (the skinny kernels read vec4s)`);
}

export interface SkinnyConcatArgs {
  /** [m, k] */
  a: GPUBuffer;
  /** One to three weights, each [n_i, k]. */
  weights: readonly GPUBuffer[];
  /** The weights' row counts n_i. */
  ns: readonly number[];
  /** Per weight, [n_i] or none; all or none of the weights have one. */
  biases?: readonly GPUBuffer[];
  /** [m, sum n_i]: row r is a_r W_0^T + b_0, then a_r W_1^T + b_1, ... */
  out: GPUBuffer;
  m: number;
  k: number;
  /**
   * RMSNorm A's rows with this weight [k] first (`skinny_concat_norm`), on devices
   * with the ninth storage binding it takes (skinnyConcatTakesNorm).
   */
  norm?: SkinnyNorm;
  /** The weights are f16 pairs. */
  half?: boolean;
}

/** Storage buffers per shader stage that `skinny_concat_norm` binds. */
const CONCAT_NORM_BINDINGS = 9;

/** Whether this device can run skinny_concat with the RMSNorm folded in (nine storage bindings). */
export function skinnyConcatTakesNorm(rt: Runtime): boolean {
  return rt.gpu.limits.maxStorageBuffersPerShaderStage >= CONCAT_NORM_BINDINGS;
}

/**
 * Several projections of the same rows in one dispatch (the skinny kernel's
 * `skinny_concat`): out = A [W_0; W_1; W_2]^T + [b_0; b_1; b_2]. A, the weights and out
 * start at offset 0.
 */
export function matmulSkinnyConcat(rt: Runtime, args: SkinnyConcatArgs): void {
  const { a, weights, ns, biases, out, m, k, norm, half } = args;
  const what = 'matmul (skinny concat)';
  checkSkinny(what, m, k);
  if (weights.length < 1 || weights.length > 3 || ns.length !== weights.length) {
    throw new GpuError(`${what}: 1 to 3 weights with a row count each, got ${weights.length} weights and ${ns.length} counts`);
  }
  if (biases && biases.length !== weights.length) throw new GpuError(`${what}: ${biases.length} biases for ${weights.length} weights`);
  const n = ns.reduce((s, x) => s + x, 0);
  if (ns.some((x) => !isCount(x)) || !isCount(n)) throw new GpuError(`${what}: row counts [${ns.join(', ')}] are not counts`);
  if (out === a || weights.includes(out) || biases?.includes(out) || out === norm?.weight) throw new GpuError(`${what}: the output buffer is also an input`);
  checkNormEps(what, norm);
  if (norm && !skinnyConcatTakesNorm(rt)) {
    throw new GpuError(`${what}: the folded RMSNorm needs ${CONCAT_NORM_BINDINGS} storage buffers per shader stage, this device offers ${rt.gpu.limits.maxStorageBuffersPerShaderStage}`);
  }
  if (m === 0 || n === 0) return;
  checkBuffer('A', a, m * k);
  weights.forEach((w, i) => checkBuffer(`weight ${i}`, w, weightWords(ns[i] * k, half)));
  biases?.forEach((bb, i) => checkBuffer(`bias ${i}`, bb, ns[i]));
  checkBuffer('C', out, m * n);
  if (norm) checkBuffer('norm weight', norm.weight, k);
  const { params, grid } = skinnyLaunch(m, n, k, ns[0], ns[1] ?? 0, norm?.eps);
  const kernel = rt.kernel(family(half), norm ? 'skinny_concat_norm' : 'skinny_concat', { SKINNY_ROWS: skinnyRows(m), BIAS: Number(!!biases) });
  // Missing weights and biases take a buffer that is bound but never read.
  const w = (i: number) => weights[i] ?? weights[0];
  const bias = (i: number) => biases?.[i] ?? biases?.[0] ?? a;
  const buffers = [a, w(0), w(1), w(2), bias(0), bias(1), bias(2), out];
  rt.dispatch(kernel, norm ? [...buffers, norm.weight] : buffers, params, grid);
}

export interface SkinnySwigluArgs {
  /** [m, k] */
  a: GPUBuffer;
  /** [n, k] each */
  gate: GPUBuffer;
  up: GPUBuffer;
  /** [m, n] = silu(A gate^T) * (A up^T) */
  out: GPUBuffer;
  m: number;
  n: number;
  k: number;
  /** RMSNorm A's rows with this weight first (A becomes rmsNorm(A, weight, eps)). */
  norm?: SkinnyNorm;
  /** gate and up are f16 pairs. */
  half?: boolean;
}

/** A gated MLP's gate and up projections and SwiGLU in one dispatch (`skinny_swiglu`); all at offset 0. */
export function matmulSkinnySwiglu(rt: Runtime, args: SkinnySwigluArgs): void {
  const { a, gate, up, out, m, n, k, norm, half } = args;
  const what = 'matmul (skinny swiglu)';
  checkSkinny(what, m, k);
  if (!isCount(n)) throw new GpuError(`${what}: n = ${n} is not a count`);
  if (out === a || out === gate || out === up || out === norm?.weight) throw new GpuError(`${what}: the output buffer is also an input`);
  checkNormEps(what, norm);
  if (m === 0 || n === 0) return;
  checkBuffer('A', a, m * k);
  checkBuffer('gate', gate, weightWords(n * k, half));
  checkBuffer('up', up, weightWords(n * k, half));
  checkBuffer('C', out, m * n);
  if (norm) checkBuffer('norm weight', norm.weight, k);
  const { params, grid } = skinnyLaunch(m, n, k, 0, 0, norm?.eps);
  const kernel = rt.kernel(family(half), 'skinny_swiglu', { SKINNY_ROWS: skinnyRows(m), SKINNY_PLANES: 2, NORM_A: Number(!!norm) });
  // Without a norm its binding still needs a buffer; A is read-only already.
  rt.dispatch(kernel, [a, gate, up, out, norm?.weight ?? a], params, grid);
}
