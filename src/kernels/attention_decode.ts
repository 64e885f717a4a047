// Launcher for shaders/attention_decode.wgsl: a decode step's attention, a workgroup per
// query row and group of query heads sharing a kv head, each row's keys cut into parts
// where the rows alone leave the GPU idle.

import type { Runtime } from '../gpu/runtime.ts';
import { attentionParams, type AttentionDims } from './attention_params.ts';
import { gridRows } from './launch.ts';

/** Query rows per head up to which the tiled path's forward takes the decode kernel. */
export const DECODE_MAX_ROWS = 8;
/** Largest head dim the decode kernel takes. */
const DECODE_MAX_HD = 256;
/** Invocations a query head's slot (DT in the shader). */
const SLOT = 32;
/** Most vec4s of keys (and as many of values) an invocation carries into the next chunk (MAX_PF). */
const MAX_CARRY = 8;
/** Most query heads a workgroup (slots). */
const MAX_SLOTS = 8;

export interface DecodeShape {
  /** Query heads a workgroup (DGP): the group cut into equal blocks of at most 8. */
  gp: number;
  /** Keys a chunk (DCH). */
  ch: number;
}

/** Workgroup memory of a decode workgroup: the queries, a chunk's padded rows, its scores, two partials a lane. */
export function decodeBytes(hd: number, s: DecodeShape): number {
  const hd4 = hd / 4;
  return 16 * (s.gp * hd4 + s.ch * (hd4 + 1)) + 4 * s.gp * s.ch + 8 * SLOT * s.gp;
}

/**
 * The decode kernel's shape for head dim `hd` and a group of `group` query heads a kv
 * head: keys a chunk are the most of `maxChunk` (attention.decodeChunk), then halves,
 * whose rows fit workgroup memory and whose vec4s an invocation can carry ahead in
 * registers. Null where the head dim is past the kernel (above 256 or not a multiple of 4).
 */
export function decodeShape(limits: { maxComputeWorkgroupStorageSize: number }, hd: number, group: number, maxChunk = 64): DecodeShape | null {
  if (![8, 16, 32, 64, 128, 256].includes(maxChunk)) throw new Error(`attention.decodeChunk: ${maxChunk} is not one of 8, 16, 32, 64, 128, 256`);
  if (hd > DECODE_MAX_HD || hd % 4 !== 0) return null;
  const gp = Math.ceil(group / Math.ceil(group / MAX_SLOTS));
  const wg = SLOT * gp;
  const hd4 = hd / 4;
  // Key subsets of P V leave their partial outputs, a vec4 a lane, in the chunk's rows.
  const subsets = SLOT >= 2 * hd4;
  for (let ch = maxChunk; ch >= 1; ch /= 2) {
    if (Math.ceil((ch * hd4) / wg) > MAX_CARRY) continue;
    if (subsets && ch * (hd4 + 1) < wg) continue;
    if (decodeBytes(hd, { gp, ch }) <= limits.maxComputeWorkgroupStorageSize) return { gp, ch };
  }
  return null;
}

/**
 * How many parts the decode kernel cuts each row's keys into: enough that `invocations`
 * (its workgroups' whole) times the parts reach `target`
 * (policy.attention.decodeInvocations), each part at least a chunk of `ch` keys (a
 * multiple of it), at most 64.
 */
export function decodeParts(invocations: number, keys: number, ch: number, target: number): { parts: number; keys: number } {
  const wanted = Math.min(Math.ceil(target / Math.max(invocations, 1)), Math.ceil(keys / ch), 64);
  if (wanted <= 1) return { parts: 1, keys: 0 };
  const per = Math.ceil(keys / wanted / ch) * ch;
  return { parts: Math.ceil(keys / per), keys: per };
}

/**
 * Records o and lse of a decode step (as attentionForward). `parts` (tests) cuts each
 * row's keys into that many parts instead of decodeParts' count. q, k and v bind as
 * vec4 arrays: their buffers' sizes must be multiples of 16 bytes (the pool's are).
 */
export function attentionDecode(
  rt: Runtime, d: AttentionDims, shape: DecodeShape,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null, o: GPUBuffer, lse: GPUBuffer, parts?: number,
): void {
  const blocks = d.hkv * Math.ceil(d.hq / d.hkv / shape.gp);
  const split = parts === undefined
    ? decodeParts(d.tq * blocks * d.b * SLOT * shape.gp, d.s, shape.ch, rt.policy.attention.decodeInvocations)
    : parts <= 1 ? { parts: 1, keys: 0 } : { parts, keys: Math.ceil(d.s / parts) };
  const kernel = rt.kernel('attention_decode', 'decode', { HD: d.hd, DGP: shape.gp, DCH: shape.ch });
  const p = attentionParams(d, !!padLeft, split).u;
  if (split.parts === 1) {
    rt.dispatch(kernel, [q, k, v, padLeft ?? q, o, lse], p, [d.tq, blocks, d.b]);
    return;
  }
  const rows = d.b * d.hq * d.tq;
  const partO = rt.pool.acquire(4 * rows * split.parts * d.hd);
  const partMl = rt.pool.acquire(8 * rows * split.parts);
  rt.dispatch(kernel, [q, k, v, padLeft ?? q, partO, partMl], p, [d.tq * split.parts, blocks, d.b]);
  rt.dispatch(rt.kernel('attention_decode', 'decode_combine', { HD: d.hd }), [null, partO, partMl, null, o, lse], p, gridRows(rows));
  rt.pool.release(partO);
  rt.pool.release(partMl);
}
