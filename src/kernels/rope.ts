// Launcher for shaders/rope.wgsl, and the inverse-frequency tables it reads.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, gridRows, uniforms } from './launch.ts';

/**
 * inv_freq[i] = 1 / theta^(2i / rotaryDim) rounded the way Hugging Face computes it in
 * float32: the exponent divided in f32, the power and the reciprocal each rounded to f32.
 */
export function ropeInvFreq(theta: number, rotaryDim: number): Float32Array {
  const out = new Float32Array(rotaryDim / 2);
  for (let i = 0; i < out.length; i++) {
    const e = Math.fround((2 * i) / rotaryDim);
    out[i] = Math.fround(1 / Math.fround(Math.pow(Math.fround(theta), e)));
  }
  return out;
}

// One small table per (runtime, theta, rotaryDim), made once and kept for the
// runtime's life: a model has a handful of these and every layer reuses them.
const tables = new WeakMap<Runtime, Map<string, GPUBuffer>>();

function invFreqTable(rt: Runtime, theta: number, rotaryDim: number): GPUBuffer {
  let perRt = tables.get(rt);
  if (!perRt) tables.set(rt, (perRt = new Map()));
  const key = `${theta}:${rotaryDim}`;
  let buf = perRt.get(key);
  if (!buf) {
    const data = ropeInvFreq(theta, rotaryDim);
    buf = rt.device.createBuffer({ size: Math.max(data.byteLength, 16), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, label: `rope inv_freq ${key}` });
    rt.upload(buf, 0, data);
    perRt.set(key, buf);
  }
  return buf;
}

export interface RopeDims {
  b: number;
  h: number;
  t: number;
  hd: number;
  rotaryDim: number;
  theta: number;
}

/** [B, H, T, HD], the layout attention reads, or [B, T, H, HD], the projections'. */
export type RopeLayout = 'heads' | 'tokens';

/**
 * y = x rotated by each position's angles; `inverse` rotates back (the backward). x and
 * y each in either layout, so a head permute rides along.
 */
export function rope(rt: Runtime, d: RopeDims, x: GPUBuffer, positions: GPUBuffer, y: GPUBuffer, inverse: boolean, layouts: { x: RopeLayout; y: RopeLayout }): void {
  const n = d.b * d.h * d.t * d.hd;
  const p = uniforms(6);
  p.u[0] = n;
  p.u[1] = d.hd;
  p.u[2] = d.t;
  p.u[3] = d.h * d.t * d.hd;
  p.u[4] = d.rotaryDim / 2;
  p.u[5] = d.h;
  const table = invFreqTable(rt, d.theta, d.rotaryDim);
  const kernel = rt.kernel('rope', 'main', { SIGN: inverse ? -1 : 1, X_TOKENS: layouts.x === 'tokens' ? 1 : 0, Y_TOKENS: layouts.y === 'tokens' ? 1 : 0 });
  rt.dispatch(kernel, [x, positions, table, y], p.u, grid1d(n));
}

export interface QkvCacheDims {
  b: number;
  t: number;
  hq: number;
  hkv: number;
  hd: number;
  rotaryDim: number;
  theta: number;
  /** Cache rows per (batch row, kv head), and where this step's tokens go. */
  capacity: number;
  offset: number;
  /** Per-head RMSNorm of q and k before the rotation (Qwen3), with this epsilon. */
  qkNorm: { q: GPUBuffer; k: GPUBuffer; eps: number } | null;
}

/**
 * One decode step's attention inputs from the fused projection `qkv` [b*t, (hq + 2 hkv) * hd]
 * (see `qkv_cache` in shaders/rope.wgsl): q rotated into `q` [b, hq, t, hd], k rotated
 * and v appended to `keys` and `values` [b, hkv, capacity, hd] at `offset`.
 */
export function ropeQkvCache(rt: Runtime, d: QkvCacheDims, qkv: GPUBuffer, positions: GPUBuffer, q: GPUBuffer, keys: GPUBuffer, values: GPUBuffer): void {
  const p = uniforms(9);
  p.u.set([d.b * d.t, d.t, d.hq, d.hkv, d.hd, d.rotaryDim / 2, d.capacity, d.offset]);
  p.setF(8, d.qkNorm?.eps ?? 0);
  const table = invFreqTable(rt, d.theta, d.rotaryDim);
  const norm = d.qkNorm ?? { q: table, k: table };
  const kernel = rt.kernel('rope', 'qkv_cache', { QK_NORM: Number(!!d.qkNorm) });
  rt.dispatch(kernel, [qkv, positions, table, norm.q, norm.k, q, keys, values], p.u, gridRows(d.b * d.t * (d.hq + 2 * d.hkv)));
}
