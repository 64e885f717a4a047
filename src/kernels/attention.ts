// Launchers for shaders/attention.wgsl: tile sizes chosen per head dim and adapter,
// the forward pass, and the three backward passes.

import type { AttentionPath } from '../gpu/kernel_policy.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { attentionParams, type AttentionDims, type TileLimits } from './attention_params.ts';
import { attentionDecode, DECODE_MAX_ROWS, decodeShape } from './attention_decode.ts';
import { grid1d, uniforms } from './launch.ts';

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

function tilesOrThrow(rt: Runtime, pass: 'forward' | 'backward', d: AttentionDims): AttentionTiles {
  const t = attentionTiles(rt.gpu.limits, pass, d.hd, d.tq, d.s);
  if (!t) throw new Error(`attention: head dim ${d.hd} does not fit ${rt.gpu.limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory`);
  return t;
}

const constants = (d: AttentionDims, t: AttentionTiles) => ({ HD: d.hd, BR: t.br, BC: t.bc, WG: t.wg });

/** Invocations of a blocked workgroup (BT in the shader). */
const BLOCKED_WG = 128;
/** Query rows and key rows of each blocked pass's tiles (BR, BC in the shader). */
const BLOCKED_TILES = {
  forward: { br: 32, bc: 32 },
  dq: { br: 32, bc: 16 },
  dkv: { br: 16, bc: 32 },
} as const;

/** Bytes of workgroup memory a blocked pass takes (the shader's arrays it uses). */
export function blockedSharedBytes(pass: keyof typeof BLOCKED_TILES, hd: number): number {
  const { br, bc } = BLOCKED_TILES[pass];
  const row = (hd / 4 + 1) * 16;
  if (pass === 'forward') return (br + 2 * bc) * row + br * bc * 4 + br * 16 * 4 + br * 4;
  if (pass === 'dq') return (2 * br + 2 * bc) * row + br * bc * 4 + 2 * br * 4;
  return (2 * br + 2 * bc) * row + 2 * br * bc * 4 + 2 * br * 4;
}

/** Whether the blocked kernels run this head dim within these limits. */
export function blockedFits(limits: TileLimits, hd: number): boolean {
  if (hd % 64 !== 0 || hd > 128) return false;
  if (BLOCKED_WG > limits.maxComputeInvocationsPerWorkgroup || BLOCKED_WG > limits.maxComputeWorkgroupSizeX) return false;
  return (['forward', 'dq', 'dkv'] as const).every((pass) => blockedSharedBytes(pass, hd) <= limits.maxComputeWorkgroupStorageSize);
}

export interface AttentionLaunch {
  /** Default: `uniform` on the software GPU (compatibility mode) when the head dim allows, else `tiled`. */
  path?: AttentionPath;
  /** Rows per uniform window; default (and at most) 16384 / hd. Tests force small ones. */
  windowRows?: number;
  /**
   * The forward's one-workgroup-per-query-row kernel (`decode` in the shader). Default:
   * on the tiled path when there are at most DECODE_MAX_ROWS query rows per head.
   */
  decode?: boolean;
  /** Parts the decode kernel cuts each row's keys into (tests); default decodeParts'. */
  decodeParts?: number;
}

/** Floats in one uniform window (64 KiB, WebGPU's default uniform binding limit). */
const WINDOW_FLOATS = 16384;
const WINDOW_BYTES = WINDOW_FLOATS * 4;
/** Invocations per workgroup of the uniform kernels (UWG in the shader). */
const UWG = 32;
const UNIFORM_MAX_HD = 128;

function uniformFits(rt: Runtime, hd: number): boolean {
  return hd % 4 === 0 && hd <= UNIFORM_MAX_HD && rt.gpu.limits.maxUniformBufferBindingSize >= WINDOW_BYTES;
}

/**
 * The kernels an attention call runs. The software GPU gets the uniform-window kernels
 * because llvmpipe assembles every workgroup-memory load lane by lane through the
 * stack: for B4 Hq4 Hkv2 T400 D64 causal on its 2 cores the tiled forward took
 * 2,610 ms and backward 7,890 ms, the uniform ones 73 and 220 ms.
 */
export function attentionPath(rt: Runtime, d: AttentionDims, launch: AttentionLaunch = {}): AttentionPath {
  const path = launch.path ?? defaultPath(rt, d.hd);
  if (path === 'uniform' && !uniformFits(rt, d.hd)) throw new Error(`attention: the uniform kernels need a head dim that is a multiple of 4 up to ${UNIFORM_MAX_HD}, got ${d.hd}`);
  if (path === 'blocked' && !blockedFits(rt.gpu.limits, d.hd)) {
    throw new Error(`attention: the blocked kernels need a head dim of 64 or 128 whose tiles fit ${rt.gpu.limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory, got ${d.hd}`);
  }
  return path;
}

/** The path of rt.policy.attention for head dim `hd`. */
function defaultPath(rt: Runtime, hd: number): AttentionPath {
  const path = rt.policy.attention.path;
  if (path !== 'auto') return path;
  if (rt.caps.compatibility && uniformFits(rt, hd)) return 'uniform';
  return blockedFits(rt.gpu.limits, hd) ? 'blocked' : 'tiled';
}

function windowRows(d: AttentionDims, launch: AttentionLaunch): number {
  const most = Math.floor(WINDOW_FLOATS / d.hd);
  const rows = launch.windowRows ?? most;
  if (!Number.isInteger(rows) || rows < 1 || rows > most) throw new Error(`attention: ${rows} rows per window; head dim ${d.hd} allows 1 to ${most}`);
  return rows;
}

// Windows are copied out per call into one buffer per runtime, grown as needed: a
// uniform binding needs UNIFORM usage, which pooled buffers lack.
const windowBuffers = new WeakMap<Runtime, GPUBuffer>();

function windowScratch(rt: Runtime, windows: number): GPUBuffer {
  const bytes = windows * WINDOW_BYTES;
  const old = windowBuffers.get(rt);
  if (old && old.size >= bytes) return old;
  if (old) {
    // Recorded dispatches may still read the old buffer: submit them before it goes.
    rt.flush();
    old.destroy();
  }
  const buf = rt.device.createBuffer({ size: Math.max(bytes, 2 * (old?.size ?? 0)), usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, label: 'attention windows' });
  windowBuffers.set(rt, buf);
  return buf;
}

const windowAt = (buffer: GPUBuffer, index: number) => ({ buffer, offset: index * WINDOW_BYTES, size: WINDOW_BYTES });

/**
 * Copies rows [0, rows) of each of `heads` blocks of `stride` rows (hd floats each)
 * from `src` into windows of `per` rows, ceil(rows / per) per head, starting at window
 * `first`.
 */
function copyWindows(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, first: number, heads: number, stride: number, rows: number, per: number, hd: number): void {
  const count = Math.ceil(rows / per);
  for (let h = 0; h < heads; h++) {
    for (let c = 0; c < count; c++) {
      const n = Math.min(per, rows - c * per);
      rt.copy(src, (h * stride + c * per) * hd * 4, dst, (first + h * count + c) * WINDOW_BYTES, n * hd * 4);
    }
  }
}

function windowParams(d: AttentionDims, hasPad: boolean, hkvIndex: number, w0: number, per: number): Uint32Array {
  const p = uniforms(13);
  p.u.set([d.tq, d.s, d.s - d.tq, d.hq, d.hq / d.hkv, d.causal ? 1 : 0, hasPad ? 1 : 0, Math.floor(hkvIndex / d.hkv), hkvIndex, w0]);
  p.setF(10, d.scale);
  p.u[11] = d.sCap;
  p.u[12] = per;
  return p.u;
}

function forwardUniform(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null, o: GPUBuffer, lse: GPUBuffer, per: number,
): void {
  const heads = d.b * d.hkv;
  const count = Math.ceil(d.s / per);
  const buf = windowScratch(rt, 2 * heads * count);
  copyWindows(rt, k, buf, 0, heads, d.sCap, d.s, per, d.hd);
  copyWindows(rt, v, buf, heads * count, heads, d.sCap, d.s, per, d.hd);
  const kernel = rt.kernel('attention', 'forward_uniform', { HD: d.hd });
  const lanes = (d.hq / d.hkv) * d.tq;
  for (let hi = 0; hi < heads; hi++) {
    for (let c = 0; c < count; c++) {
      const p = windowParams(d, !!padLeft, hi, c * per, per);
      const wi = hi * count + c;
      rt.dispatch(kernel, [q, windowAt(buf, wi), windowAt(buf, heads * count + wi), padLeft ?? q, o, lse], p, [Math.ceil(lanes / UWG)]);
    }
  }
}

/**
 * o and lse (the row log-sum-exp the backward needs). Without a pad_left buffer the
 * shader ignores binding 4, which then gets `q` (bindings must all be filled).
 */
export function attentionForward(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null, o: GPUBuffer, lse: GPUBuffer,
  launch: AttentionLaunch = {},
): void {
  const path = attentionPath(rt, d, launch);
  if (path === 'uniform') {
    forwardUniform(rt, d, q, k, v, padLeft, o, lse, windowRows(d, launch));
    return;
  }
  const group = d.hq / d.hkv;
  const shape = decodeShape(rt.gpu.limits, d.hd, group, rt.policy.attention.decodeChunk);
  const decode = launch.decode ?? (d.tq <= DECODE_MAX_ROWS && shape !== null);
  if (decode) {
    if (!shape) throw new Error(`attention: the decode kernel takes head dims that are multiples of 4 up to 256 whose staged keys fit ${rt.gpu.limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory, got ${d.hd}`);
    attentionDecode(rt, d, shape, q, k, v, padLeft, o, lse, launch.decodeParts);
    return;
  }
  if (path === 'blocked') {
    const t = BLOCKED_TILES.forward;
    rt.dispatch(rt.kernel('attention', 'forward_blocked', blockedConstants(d, 'forward')), [q, k, v, padLeft ?? q, o, lse], attentionParams(d, !!padLeft).u,
      [Math.ceil(d.tq / t.br), d.hq, d.b]);
    return;
  }
  const t = tilesOrThrow(rt, 'forward', d);
  rt.dispatch(rt.kernel('attention', 'forward', constants(d, t)), [q, k, v, padLeft ?? q, o, lse], attentionParams(d, !!padLeft).u,
    [Math.ceil(d.tq / t.br), d.hq, d.b]);
}

const blockedConstants = (d: AttentionDims, pass: keyof typeof BLOCKED_TILES) =>
  ({ HD: d.hd, BR: BLOCKED_TILES[pass].br, BC: BLOCKED_TILES[pass].bc, WG: BLOCKED_WG, NQ: pass === 'forward' ? 1 : 2 });

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
  launch: AttentionLaunch = {},
): void {
  const p = attentionParams(d, !!padLeft).u;
  attentionDelta(rt, d, o, dO, delta);
  const path = attentionPath(rt, d, launch);
  if (path === 'uniform') {
    backwardUniform(rt, d, q, k, v, padLeft, dO, lse, delta, grads, windowRows(d, launch));
    return;
  }
  if (path === 'blocked') {
    backwardBlocked(rt, d, q, k, v, padLeft, dO, lse, delta, grads);
    return;
  }
  const t = tilesOrThrow(rt, 'backward', d);
  const pad = padLeft ?? q;
  if (grads.dk || grads.dv) {
    withKvGrads(rt, d, grads, (dk, dv) => {
      rt.dispatch(rt.kernel('attention', 'backward_dkv', constants(d, t)), [q, k, v, pad, dO, lse, delta, dk, dv], p,
        [Math.ceil(d.s / t.bc), d.hkv, d.b]);
    });
  }
  if (grads.dq) {
    rt.dispatch(rt.kernel('attention', 'backward_dq', constants(d, t)), [q, k, v, pad, dO, lse, delta, grads.dq], p,
      [Math.ceil(d.tq / t.br), d.hq, d.b]);
  }
}

/** delta = rowsum(dO * O), B * Hq * Tq floats: what every backward subtracts from dP. */
export function attentionDelta(rt: Runtime, d: AttentionDims, o: GPUBuffer, dO: GPUBuffer, delta: GPUBuffer): void {
  rt.dispatch(rt.kernel('attention', 'delta', { HD: d.hd }), [o, dO, delta], attentionParams(d, false).u, grid1d(d.b * d.hq * d.tq));
}

function backwardUniform(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null,
  dO: GPUBuffer, lse: GPUBuffer, delta: GPUBuffer, grads: AttentionGrads, per: number,
): void {
  const group = d.hq / d.hkv;
  const kvHeads = d.b * d.hkv;
  const qHeads = d.b * d.hq;
  const kvBytes = kvHeads * d.sCap * d.hd * 4;
  if (grads.dq) {
    const count = Math.ceil(d.s / per);
    const buf = windowScratch(rt, 2 * kvHeads * count);
    copyWindows(rt, k, buf, 0, kvHeads, d.sCap, d.s, per, d.hd);
    copyWindows(rt, v, buf, kvHeads * count, kvHeads, d.sCap, d.s, per, d.hd);
    rt.clear(grads.dq, 0, qHeads * d.tq * d.hd * 4);
    const kernel = rt.kernel('attention', 'backward_dq_uniform', { HD: d.hd });
    for (let hi = 0; hi < kvHeads; hi++) {
      for (let c = 0; c < count; c++) {
        const wi = hi * count + c;
        rt.dispatch(kernel, [q, windowAt(buf, wi), windowAt(buf, kvHeads * count + wi), padLeft ?? q, dO, lse, delta, grads.dq],
          windowParams(d, !!padLeft, hi, c * per, per), [Math.ceil((group * d.tq) / UWG)]);
      }
    }
  }
  if (!grads.dk && !grads.dv) return;
  const dk = grads.dk ?? rt.pool.acquire(kvBytes);
  const dv = grads.dv ?? rt.pool.acquire(kvBytes);
  rt.clear(dk, 0, kvBytes);
  rt.clear(dv, 0, kvBytes);
  // Windows of query rows per query head: q, dO, then each window's lse and delta.
  const count = Math.ceil(d.tq / per);
  const windows = qHeads * count;
  const buf = windowScratch(rt, 3 * windows);
  copyWindows(rt, q, buf, 0, qHeads, d.tq, d.tq, per, d.hd);
  copyWindows(rt, dO, buf, windows, qHeads, d.tq, d.tq, per, d.hd);
  copyWindows(rt, lse, buf, 2 * windows, qHeads, d.tq, d.tq, per, 1);
  for (let h = 0; h < qHeads; h++) {
    for (let c = 0; c < count; c++) {
      const n = Math.min(per, d.tq - c * per);
      rt.copy(delta, (h * d.tq + c * per) * 4, buf, (2 * windows + h * count + c) * WINDOW_BYTES + per * 4, n * 4);
    }
  }
  const kernel = rt.kernel('attention', 'backward_dkv_uniform', { HD: d.hd });
  for (let hi = 0; hi < kvHeads; hi++) {
    const b = Math.floor(hi / d.hkv);
    for (let g = 0; g < group; g++) {
      const qh = b * d.hq + (hi % d.hkv) * group + g;
      for (let c = 0; c < count; c++) {
        const wi = qh * count + c;
        rt.dispatch(kernel, [k, windowAt(buf, wi), windowAt(buf, windows + wi), padLeft ?? k, v, windowAt(buf, 2 * windows + wi), dk, dv],
          windowParams(d, !!padLeft, hi, c * per, per), [Math.ceil(d.s / UWG)]);
      }
    }
  }
  if (!grads.dk) rt.pool.release(dk);
  if (!grads.dv) rt.pool.release(dv);
}

function backwardBlocked(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null,
  dO: GPUBuffer, lse: GPUBuffer, delta: GPUBuffer, grads: AttentionGrads,
): void {
  const p = attentionParams(d, !!padLeft).u;
  const pad = padLeft ?? q;
  if (grads.dq) {
    rt.dispatch(rt.kernel('attention', 'backward_dq_blocked', blockedConstants(d, 'dq')), [q, k, v, pad, dO, lse, delta, grads.dq], p,
      [Math.ceil(d.tq / BLOCKED_TILES.dq.br), d.hq, d.b]);
  }
  kvGradsPerQueryHead(rt, d, grads, (partK, partV) => {
    rt.dispatch(rt.kernel('attention', 'backward_dkv_blocked', blockedConstants(d, 'dkv')), [q, k, v, pad, dO, lse, delta, partK, partV], p,
      [Math.ceil(d.s / BLOCKED_TILES.dkv.bc), d.hq, d.b]);
  });
}

/**
 * dk and dv (where asked for) from a kernel that writes one query head's share at a
 * time (no float atomics): `fill` gets [B, Hq, S, HD] partials, which sum_group then adds
 * over each kv head's group, or dk and dv themselves when a kv head has one query head.
 */
export function kvGradsPerQueryHead(rt: Runtime, d: AttentionDims, grads: AttentionGrads, fill: (partK: GPUBuffer, partV: GPUBuffer) => void): void {
  if (!grads.dk && !grads.dv) return;
  withKvGrads(rt, d, grads, (dk, dv) => {
    const group = d.hq / d.hkv;
    const partBytes = d.b * d.hq * d.s * d.hd * 4;
    const partK = group === 1 ? dk : rt.pool.acquire(partBytes);
    const partV = group === 1 ? dv : rt.pool.acquire(partBytes);
    fill(partK, partV);
    if (group === 1) return;
    const sum = rt.kernel('attention', 'sum_group', { HD: d.hd });
    const vec4s = d.b * d.hkv * d.s * (d.hd / 4);
    const ps = attentionParams(d, false);
    ps.u[9] = vec4s;
    rt.dispatch(sum, [partK, dk], ps.u, grid1d(vec4s));
    rt.dispatch(sum, [partV, dv], ps.u, grid1d(vec4s));
    rt.pool.release(partK);
    rt.pool.release(partV);
  });
}

/**
 * Runs `fill` with dk and dv buffers (pooled scratch for the one nobody asked for), their
 * key rows in [s, sCap) zeroed first, since the kernels write only the first s.
 */
function withKvGrads(rt: Runtime, d: AttentionDims, grads: AttentionGrads, fill: (dk: GPUBuffer, dv: GPUBuffer) => void): void {
  const kvBytes = d.b * d.hkv * d.sCap * d.hd * 4;
  const dk = grads.dk ?? rt.pool.acquire(kvBytes);
  const dv = grads.dv ?? rt.pool.acquire(kvBytes);
  if (d.s < d.sCap) {
    rt.clear(dk, 0, kvBytes);
    rt.clear(dv, 0, kvBytes);
  }
  fill(dk, dv);
  if (!grads.dk) rt.pool.release(dk);
  if (!grads.dv) rt.pool.release(dv);
}
