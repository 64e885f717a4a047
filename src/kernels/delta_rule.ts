// Launchers for shaders/delta_rule.wgsl (chunked forward, recurrent decoding) and
// shaders/delta_rule_backward.wgsl. Inputs q, k [B, T, Hk, Dk], v [B, T, Hv, Dv],
// g, beta [B, T, Hv]; the chunk-layout scratch buffers are listed with their sizes in
// `scratchSizes`.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, gridRows, uniforms } from './launch.ts';
import { reduce } from './reduce.ts';

/** The largest chunk: the backward's per-invocation arrays are sized for it. */
export const MAX_CHUNK = 64;

export interface DeltaRuleDims {
  b: number;
  t: number;
  hk: number;
  hv: number;
  dk: number;
  dv: number;
  scale: number;
  /** Absolute position of the first token (for the padding test). */
  offset: number;
}

export interface DeltaRuleTiles {
  chunk: number;
  /** Chunks covering T. */
  nc: number;
  /** Dk rounded up to a power of two: rows of a state block in workgroup memory. */
  kmax: number;
  /** Value columns per state-scan workgroup. */
  bv: number;
  nvb: number;
}

/** Tiles for these sizes within `maxWorkgroupBytes`, or null when a state block cannot fit. */
export function deltaRuleTiles(maxWorkgroupBytes: number, d: Pick<DeltaRuleDims, 't' | 'dk' | 'dv'>, chunk: number): DeltaRuleTiles | null {
  let kmax = 16;
  while (kmax < d.dk) kmax *= 2;
  let bv = 64;
  while (bv > 1 && (bv / 2 >= d.dv || (kmax + chunk) * bv * 4 > maxWorkgroupBytes)) bv /= 2;
  if ((kmax + chunk) * bv * 4 > maxWorkgroupBytes || (chunk * chunk + chunk) * 4 > maxWorkgroupBytes) return null;
  return { chunk, nc: Math.max(1, Math.ceil(d.t / chunk)), kmax, bv, nvb: Math.ceil(d.dv / bv) };
}

export interface DeltaRuleInputs {
  q: GPUBuffer;
  k: GPUBuffer;
  v: GPUBuffer;
  g: GPUBuffer;
  beta: GPUBuffer;
}

/** Forward scratch, all in chunk layout over padded time Tp = nc * chunk. */
export interface ForwardScratch {
  /** [B, Hv, Tp, 4]: (cumulative log-decay in the chunk, beta, valid, 0) */
  gb: GPUBuffer;
  /** [B, Hv, Tp, chunk] */
  p: GPUBuffer;
  kk: GPUBuffer;
  tinv: GPUBuffer;
  /** [B, Hv, Tp, Dk] */
  w: GPUBuffer;
  /** [B, Hv, Tp, Dv] */
  u: GPUBuffer;
  vn: GPUBuffer;
  /** [B, Hv, nc, Dk, Dv]: the state at each chunk's start */
  h: GPUBuffer;
}

export interface BackwardScratch {
  /** [B, Hv, nc, Dk, Dv]: the gradient of the state at each chunk's end */
  dh: GPUBuffer;
  /** [B, Hv, Tp, Dv] */
  dvn: GPUBuffer;
  /** [B, Hv, Tp, 3, Dk] */
  dm: GPUBuffer;
  /** [B, Hv, Tp, chunk] */
  dp: GPUBuffer;
  /** [B, Hv, Tp, chunk]: dT, then dA in place */
  dt: GPUBuffer;
  /** [B, Hv, Tp, 4] */
  rows: GPUBuffer;
}

type Sizes<S> = Record<keyof S, number>;

/** Elements of each scratch buffer. */
export function scratchSizes(d: DeltaRuleDims, t: DeltaRuleTiles): { forward: Sizes<ForwardScratch>; backward: Sizes<BackwardScratch> } {
  const rows = d.b * d.hv * t.nc * t.chunk;
  const states = d.b * d.hv * t.nc * d.dk * d.dv;
  return {
    forward: { gb: rows * 4, p: rows * t.chunk, kk: rows * t.chunk, tinv: rows * t.chunk, w: rows * d.dk, u: rows * d.dv, vn: rows * d.dv, h: states },
    backward: { dh: states, dvn: rows * d.dv, dm: rows * 3 * d.dk, dp: rows * t.chunk, dt: rows * t.chunk, rows: rows * 4 },
  };
}

function params(d: DeltaRuleDims, t: DeltaRuleTiles, n: number, hasPad: boolean, hasState: boolean): Uint32Array {
  const p = uniforms(16);
  p.u.set([n, d.b, d.t, d.hk, d.hv, d.dk, d.dv, t.nc, t.chunk, d.offset, hasPad ? 1 : 0, hasState ? 1 : 0]);
  p.setF(12, d.scale);
  p.u[13] = t.nvb;
  p.u[14] = d.hv / d.hk;
  return p.u;
}

// Only the overrides an entry point uses may be passed to its pipeline.
const chunkOnly = (t: DeltaRuleTiles) => ({ CHUNK: t.chunk });
const scan = (t: DeltaRuleTiles) => ({ CHUNK: t.chunk, KMAX: t.kmax, BV: t.bv });

/**
 * Runs the chunked forward: scratch filled, out [B, T, Hv, Dv] (unless null), and
 * `state` [B, Hv, Dk, Dv] (the initial state, zeros for a fresh sequence) advanced in
 * place. WebGPU forbids binding one buffer writably twice, so there is always a state.
 */
export function chunkForward(
  rt: Runtime, d: DeltaRuleDims, t: DeltaRuleTiles, x: DeltaRuleInputs, padLeft: GPUBuffer | null, state: GPUBuffer,
  s: ForwardScratch, out: GPUBuffer | null,
): void {
  const hasPad = !!padLeft;
  const bh = d.b * d.hv;
  const rows = bh * t.nc * t.chunk;
  const run = (family: string, entry: string, constants: Record<string, number> | undefined, buffers: GPUBuffer[], n: number, grid: readonly [number, number]) =>
    rt.dispatch(rt.kernel(family, entry, constants), buffers, params(d, t, n, hasPad, true), grid);
  run('delta_rule', 'gates', undefined, [padLeft ?? x.g, x.g, x.beta, s.gb], bh * t.nc, grid1d(bh * t.nc));
  run('delta_rule', 'pairs', undefined, [s.gb, x.q, x.k, s.p, s.kk], rows * t.chunk, grid1d(rows * t.chunk));
  run('delta_rule', 'tinv', chunkOnly(t), [s.gb, s.kk, s.tinv], bh * t.nc, gridRows(bh * t.nc));
  run('delta_rule', 'wu', undefined, [s.gb, x.k, x.v, s.tinv, s.w, s.u], rows * (d.dk + d.dv), grid1d(rows * (d.dk + d.dv)));
  run('delta_rule', 'states', scan(t), [s.gb, x.k, s.w, s.u, state, s.h, s.vn], bh * t.nvb, gridRows(bh * t.nvb));
  if (out) run('delta_rule', 'output', undefined, [s.gb, x.q, s.p, s.h, s.vn, out], d.b * d.t * d.hv * d.dv, grid1d(d.b * d.t * d.hv * d.dv));
}

/** The recurrence token by token on `state` [B, Hv, Dk, Dv] in place (decoding). */
export function recurrent(rt: Runtime, d: DeltaRuleDims, x: DeltaRuleInputs, padLeft: GPUBuffer | null, state: GPUBuffer, out: GPUBuffer): void {
  const n = d.b * d.hv * d.dv;
  const t: DeltaRuleTiles = { chunk: 1, nc: 1, kmax: 0, bv: 0, nvb: 0 };
  rt.dispatch(rt.kernel('delta_rule', 'recurrent'), [padLeft ?? x.g, x.q, x.k, x.v, x.g, x.beta, state, out], params(d, t, n, !!padLeft, true), grid1d(n));
}

export interface DeltaRuleGrads {
  dq: GPUBuffer;
  dk: GPUBuffer;
  dv: GPUBuffer;
  dg: GPUBuffer;
  dbeta: GPUBuffer;
}

/** Gradients of every input given dO, from the forward scratch of chunkForward (no state). */
export function chunkBackward(
  rt: Runtime, d: DeltaRuleDims, t: DeltaRuleTiles, x: DeltaRuleInputs, padLeft: GPUBuffer | null,
  f: ForwardScratch, dO: GPUBuffer, s: BackwardScratch, grads: DeltaRuleGrads,
): void {
  const bh = d.b * d.hv;
  const rows = bh * t.nc * t.chunk;
  const run = (entry: string, constants: Record<string, number> | undefined, buffers: GPUBuffer[], n: number, grid: readonly [number, number]) =>
    rt.dispatch(rt.kernel('delta_rule_backward', entry, constants), buffers, params(d, t, n, !!padLeft, false), grid);
  run('dstates', scan(t), [f.gb, x.q, x.k, f.w, f.p, dO, s.dh, s.dvn], bh * t.nvb, gridRows(bh * t.nvb));
  run('dmats', undefined, [dO, f.h, f.vn, s.dh, s.dvn, s.dm], rows * 3 * d.dk, grid1d(rows * 3 * d.dk));
  run('dpt', undefined, [f.gb, x.k, x.v, dO, f.vn, s.dvn, s.dm, s.dp, s.dt], rows * t.chunk, grid1d(rows * t.chunk));
  run('da', chunkOnly(t), [f.tinv, s.dt], bh * t.nc, gridRows(bh * t.nc));
  const nqk = d.b * d.t * d.hk * 2 * d.dk;
  run('dqk', undefined, [f.gb, x.q, x.k, s.dm, s.dp, s.dt, f.tinv, grads.dq, grads.dk], nqk, grid1d(nqk));
  const nv = d.b * d.t * d.hv * d.dv;
  run('dv', undefined, [f.gb, f.tinv, s.dvn, grads.dv], nv, grid1d(nv));
  run('drows', undefined, [f.gb, x.q, x.k, x.v, f.kk, f.p, f.tinv, s.dm, s.dvn, s.dp, s.dt, f.h, s.dh, s.rows], rows, grid1d(rows));
  run('dgates', undefined, [f.gb, s.rows, grads.dg, grads.dbeta], bh * t.nc, grid1d(bh * t.nc));
}

function gateParams(n: number, h: number): Uint32Array {
  const p = uniforms(16);
  p.u[0] = n;
  p.u[4] = h;
  return p.u;
}

/** g [rows, H] = -exp(aLog) softplus(a + dtBias). */
export function decayGate(rt: Runtime, a: GPUBuffer, aLog: GPUBuffer, dtBias: GPUBuffer, g: GPUBuffer, rows: number, h: number): void {
  rt.dispatch(rt.kernel('delta_rule', 'decay_gate'), [a, aLog, dtBias, g], gateParams(rows * h, h), grid1d(rows * h));
}

/** da [rows, H], and the row sums daLog and dDtBias [H]; `perElement` is scratch [rows, H]. */
export function decayGateGrad(
  rt: Runtime, a: GPUBuffer, aLog: GPUBuffer, dtBias: GPUBuffer, dg: GPUBuffer, rows: number, h: number,
  da: GPUBuffer, perElement: GPUBuffer, daLog: GPUBuffer | null, dDtBias: GPUBuffer | null,
): void {
  rt.dispatch(rt.kernel('delta_rule', 'decay_gate_grad'), [a, aLog, dtBias, dg, da, perElement], gateParams(rows * h, h), grid1d(rows * h));
  if (daLog) reduce(rt, 'sum', perElement, daLog, 1, rows, h);
  if (dDtBias) reduce(rt, 'sum', da, dDtBias, 1, rows, h);
}
