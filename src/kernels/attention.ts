// Launchers for shaders/attention.wgsl: tile sizes chosen per head dim and adapter,
// the forward pass, and the three backward passes.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

export interface AttentionDims {
  b: number;
  hq: number;
  hkv: number;
  /** Query rows per head. */
  tq: number;
  /** Visible key rows per head (the cache length when decoding). */
  s: number;
  /** Key rows stored per head (>= s; a KV cache's capacity). */
  sCap: number;
  hd: number;
  scale: number;
  causal: boolean;
}

export type TileLimits = Pick<GPUSupportedLimits, 'maxComputeWorkgroupStorageSize' | 'maxComputeInvocationsPerWorkgroup' | 'maxComputeWorkgroupSizeX'>;

export interface AttentionTiles {
  br: number;
  bc: number;
  wg: number;
}

/** Per-invocation accumulator limit, MAX_ACC in the shader. */
const MAX_ACC = 16;
const MAX_WG = 256;

const nextPow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(n, 1)));

/**
 * Bytes of workgroup memory a tiling takes: row-padded tiles of q (and dO), k and v,
 * the score tile, and the per-row state (forward m, l, alpha; backward lse, delta).
 */
export function attentionSharedBytes(pass: 'forward' | 'backward', br: number, bc: number, hd: number): number {
  const hdp = hd + 1;
  const floats = pass === 'forward'
    ? (br + 2 * bc) * hdp + br * bc + 3 * br
    : 2 * (br + bc) * hdp + br * bc + 2 * br;
  return floats * 4;
}

/**
 * The largest query/key tiles that fit the adapter's workgroup memory and the
 * accumulator limit, shrunk to the row counts at hand (a decode step has 1 query row).
 * Returns null when no tiling fits (head dim too large).
 */
export function attentionTiles(limits: TileLimits, pass: 'forward' | 'backward', hd: number, tq: number, s: number): AttentionTiles | null {
  const bytes = limits.maxComputeWorkgroupStorageSize;
  const maxWg = Math.min(MAX_WG, limits.maxComputeInvocationsPerWorkgroup, limits.maxComputeWorkgroupSizeX);
  const brCap = Math.min(64, nextPow2(tq));
  const bcCap = Math.min(64, nextPow2(s));
  let best: AttentionTiles | null = null;
  for (let br = brCap; br >= 1; br /= 2) {
    for (let bc = bcCap; bc >= 1; bc /= 2) {
      const outRows = pass === 'forward' ? br : Math.max(br, bc);
      const wg = Math.min(maxWg, Math.max(32, nextPow2(Math.max(br * bc, outRows * hd))));
      if (Math.ceil((outRows * hd) / wg) > MAX_ACC) continue;
      if (attentionSharedBytes(pass, br, bc, hd) > bytes) continue;
      if (!best || br * bc > best.br * best.bc) best = { br, bc, wg };
    }
  }
  return best;
}

function params(d: AttentionDims, hasPad: boolean) {
  const p = uniforms(11);
  p.u[0] = d.tq;
  p.u[1] = d.s;
  p.u[2] = d.sCap;
  p.u[3] = d.s - d.tq;
  p.u[4] = d.hq;
  p.u[5] = d.hkv;
  p.u[6] = d.hq / d.hkv;
  p.u[7] = d.causal ? 1 : 0;
  p.u[8] = hasPad ? 1 : 0;
  p.u[9] = d.b * d.hq * d.tq;
  p.f[10] = d.scale;
  return p;
}

function tilesOrThrow(rt: Runtime, pass: 'forward' | 'backward', d: AttentionDims): AttentionTiles {
  const t = attentionTiles(rt.gpu.limits, pass, d.hd, d.tq, d.s);
  if (!t) throw new Error(`attention: head dim ${d.hd} does not fit ${rt.gpu.limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory`);
  return t;
}

const constants = (d: AttentionDims, t: AttentionTiles) => ({ HD: d.hd, BR: t.br, BC: t.bc, WG: t.wg });

/**
 * o and lse (the row log-sum-exp the backward needs). Without a pad_left buffer the
 * shader ignores binding 4, which then gets `q` (bindings must all be filled).
 */
export function attentionForward(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null, o: GPUBuffer, lse: GPUBuffer,
): void {
  const t = tilesOrThrow(rt, 'forward', d);
  rt.dispatch(rt.kernel('attention', 'forward', constants(d, t)), [q, k, v, padLeft ?? q, o, lse], params(d, !!padLeft).u,
    [Math.ceil(d.tq / t.br), d.hq, d.b]);
}

export interface AttentionGrads {
  dq: GPUBuffer | null;
  dk: GPUBuffer | null;
  dv: GPUBuffer | null;
}

/**
 * Gradients of q, k, v from dO. `delta` is scratch of B * Hq * Tq floats. dk and dv are
 * computed together; pass null for gradients nobody needs (dk and dv both null skips
 * that pass). Key rows in [s, sCap) of dk/dv are zeroed.
 */
export function attentionBackward(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null,
  o: GPUBuffer, dO: GPUBuffer, lse: GPUBuffer, delta: GPUBuffer, grads: AttentionGrads,
): void {
  const p = params(d, !!padLeft).u;
  const rows = d.b * d.hq * d.tq;
  rt.dispatch(rt.kernel('attention', 'delta', { HD: d.hd }), [o, dO, delta], p, grid1d(rows));
  const t = tilesOrThrow(rt, 'backward', d);
  const pad = padLeft ?? q;
  if (grads.dk || grads.dv) {
    const kvBytes = d.b * d.hkv * d.sCap * d.hd * 4;
    const dk = grads.dk ?? rt.pool.acquire(kvBytes);
    const dv = grads.dv ?? rt.pool.acquire(kvBytes);
    if (d.s < d.sCap) {
      rt.clear(dk, 0, kvBytes);
      rt.clear(dv, 0, kvBytes);
    }
    rt.dispatch(rt.kernel('attention', 'backward_dkv', constants(d, t)), [q, k, v, pad, dO, lse, delta, dk, dv], p,
      [Math.ceil(d.s / t.bc), d.hkv, d.b]);
    if (!grads.dk) rt.pool.release(dk);
    if (!grads.dv) rt.pool.release(dv);
  }
  if (grads.dq) {
    rt.dispatch(rt.kernel('attention', 'backward_dq', constants(d, t)), [q, k, v, pad, dO, lse, delta, grads.dq], p,
      [Math.ceil(d.tq / t.br), d.hq, d.b]);
  }
}
