// Launcher for shaders/attention_tensor.wgsl: the attention forward on tensor cores,
// for passes that record no gradient.

import type { Runtime } from '../gpu/runtime.ts';
import { DECODE_MAX_ROWS } from './attention_decode.ts';
import { attentionParams, type AttentionDims, type TileLimits } from './attention_params.ts';
import { tensorCoresMissing } from './matmul/tensor.ts';

/** Keys a tile and halves of padding a stored row (BC, PAD in the shader). */
const BC = 32;
const PAD = 8;
const SUBGROUP = 32;

/** Workgroup memory of `subgroups` subgroups (16 query rows each) at head dim `hd`: f16 q, k, v and P tiles, f32 score scratch, four rescale flags. */
export function tensorAttentionBytes(hd: number, subgroups: number): number {
  const br = 16 * subgroups;
  const halves = (br + 2 * BC) * (hd + PAD) + subgroups * 16 * (BC + PAD) - PAD;
  return 2 * halves + 4 * subgroups * 16 * BC + 16;
}

/** The most subgroups (4, 2 or 1) whose tiles fit these limits, or null when none does or the head dim is not a multiple of 16 up to 128. */
export function tensorAttentionSubgroups(limits: TileLimits, hd: number): number | null {
  if (hd % 16 !== 0 || hd < 16 || hd > 128) return null;
  return subgroupsFitting(limits, (sgs) => tensorAttentionBytes(hd, sgs));
}

/** The most subgroups of 32 (4, 2 or 1) a workgroup of these limits holds with `bytes(subgroups)` of workgroup memory, or null. */
export function subgroupsFitting(limits: TileLimits, bytes: (subgroups: number) => number): number | null {
  for (const sgs of [4, 2, 1]) {
    const threads = SUBGROUP * sgs;
    if (threads > limits.maxComputeInvocationsPerWorkgroup || threads > limits.maxComputeWorkgroupSizeX) continue;
    if (bytes(sgs) <= limits.maxComputeWorkgroupStorageSize) return sgs;
  }
  return null;
}

/** Why the tensor-core forward cannot run head dim `hd` here, or null when it can. */
export function tensorAttentionMissing(rt: Runtime, hd: number): string | null {
  const cores = tensorCoresMissing(rt, 'the tensor-core attention');
  if (cores) return cores;
  if (hd % 16 !== 0 || hd > 128) return `the tensor-core attention needs a head dim that is a multiple of 16 up to 128, got ${hd}`;
  if (tensorAttentionSubgroups(rt.gpu.limits, hd) === null) {
    return `the tensor-core attention needs ${tensorAttentionBytes(hd, 1)} bytes of workgroup memory at head dim ${hd}; ${rt.gpu.description} offers ${rt.gpu.limits.maxComputeWorkgroupStorageSize}`;
  }
  return null;
}

/**
 * Whether a forward that records no gradient, and is no training forward, takes the
 * tensor-core kernel: when the policy asks for it (attention.tensorForward, and tensor
 * cores enabled), the device can, it is no decode step (at most DECODE_MAX_ROWS query
 * rows a head, which the one-workgroup-a-row decode kernel serves) and it is large
 * enough (attention.tensorForwardMinScores). Training forwards follow their backward
 * (trainingTakesTensorCores).
 */
export function forwardTakesTensorCores(rt: Runtime, d: AttentionDims): boolean {
  const p = rt.policy;
  return p.attention.tensorForward && !p.attention.trainingForward && p.tensorCores.enabled && d.tq > DECODE_MAX_ROWS &&
    d.b * d.hq * d.tq * d.s >= p.attention.tensorForwardMinScores && tensorAttentionMissing(rt, d.hd) === null;
}

/**
 * Records o and lse (as attentionForward) on tensor cores: q, k, v and the
 * unnormalised probabilities rounded to f16, f32 sums. All four buffers bind as vec4 arrays, so
 * their sizes must be multiples of 16 bytes (the pool's are). Without a pad_left
 * buffer binding 4 gets `q`.
 */
export function attentionForwardTensor(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null, o: GPUBuffer, lse: GPUBuffer,
): void {
  const missing = tensorAttentionMissing(rt, d.hd);
  if (missing) throw new Error(`attention: ${missing}`);
  const sgs = tensorAttentionSubgroups(rt.gpu.limits, d.hd)!;
  rt.dispatch(rt.kernel('attention_tensor', 'forward_tensor', { HD: d.hd, SGS: sgs }), [q, k, v, padLeft ?? q, o, lse], attentionParams(d, !!padLeft).u,
    [Math.ceil(d.tq / (16 * sgs)), d.hq, d.b]);
}
