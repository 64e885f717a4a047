// Launcher for shaders/attention_tensor_backward.wgsl: the attention backward on
// tensor cores, for taped forwards whose backward is large enough.

import type { Runtime } from '../gpu/runtime.ts';
import { attentionDelta, kvGradsPerQueryHead, type AttentionGrads } from './attention.ts';
import { DECODE_MAX_ROWS } from './attention_decode.ts';
import { attentionParams, type AttentionDims, type TileLimits } from './attention_params.ts';
import { subgroupsFitting, tensorAttentionMissing } from './attention_tensor.ts';
import { productScale } from './grad_scale.ts';
import { tensorCoresMissing } from './matmul/tensor.ts';

/** Rows of the other side a loop step, halves of padding a stored row, rows staged (TILE, PAD, STAGE_ROWS in the shader). */
const TILE = 32;
const PAD = 8;
const STAGE_ROWS = 64;
/** q, k, v, pad_left, dO, lse, delta, dK and dV partials, sigma. */
const STORAGE_BUFFERS = 10;

/** Workgroup memory of `subgroups` subgroups at head dim `hd`: the staged rows, f32 scratch, f16 P and dS tiles, lse and delta rows. */
export function tensorBackwardBytes(hd: number, subgroups: number): number {
  const halves = STAGE_ROWS * (hd + PAD) + 2 * subgroups * 16 * (TILE + PAD);
  return 2 * halves + 4 * (subgroups * 16 * TILE + 2 * STAGE_ROWS);
}

/** The most subgroups (4, 2 or 1) whose tiles fit these limits, or null when none does or the head dim is not a multiple of 16 up to 64. */
export function tensorBackwardSubgroups(limits: TileLimits, hd: number): number | null {
  if (hd % 16 !== 0 || hd < 16 || hd > 64) return null;
  return subgroupsFitting(limits, (sgs) => tensorBackwardBytes(hd, sgs));
}

/** Why the tensor-core backward cannot run head dim `hd` here, or null when it can. */
export function tensorBackwardMissing(rt: Runtime, hd: number): string | null {
  const cores = tensorCoresMissing(rt, 'the tensor-core attention backward');
  if (cores) return cores;
  if (hd % 16 !== 0 || hd > 64) return `the tensor-core attention backward needs a head dim that is a multiple of 16 up to 64, got ${hd}`;
  const limits = rt.gpu.limits;
  if (limits.maxStorageBuffersPerShaderStage < STORAGE_BUFFERS) {
    return `the tensor-core attention backward needs ${STORAGE_BUFFERS} storage buffers a shader stage; ${rt.gpu.description} offers ${limits.maxStorageBuffersPerShaderStage}`;
  }
  if (tensorBackwardSubgroups(limits, hd) === null) {
    return `the tensor-core attention backward needs ${tensorBackwardBytes(hd, 1)} bytes of workgroup memory at head dim ${hd}; ${rt.gpu.description} offers ${limits.maxComputeWorkgroupStorageSize}`;
  }
  return null;
}

/**
 * Whether a backward takes the tensor-core kernels: when the policy asks for it
 * (attention.tensorBackward, with tensor cores on for gradients), the device can, it is
 * no decode-width call and it is large enough (attention.tensorBackwardMinScores).
 */
export function backwardTakesTensorCores(rt: Runtime, d: AttentionDims): boolean {
  const p = rt.policy;
  return p.attention.tensorBackward && p.tensorCores.enabled && p.tensorCores.gradients && d.tq > DECODE_MAX_ROWS &&
    d.b * d.hq * d.tq * d.s >= p.attention.tensorBackwardMinScores && tensorBackwardMissing(rt, d.hd) === null;
}

/**
 * Whether a taped forward, or one recorded as a training forward
 * (attention.trainingForward), takes the tensor-core forward: where the policy asks for
 * it (attention.tensorTrainingForward), exactly when its backward takes the tensor-core
 * backward, so that the lse the backward reads has the rounding its own probabilities
 * have.
 */
export function trainingTakesTensorCores(rt: Runtime, d: AttentionDims): boolean {
  return rt.policy.attention.tensorTrainingForward && backwardTakesTensorCores(rt, d) && tensorAttentionMissing(rt, d.hd) === null;
}

/**
 * Records the gradients of q, k, v (as attentionBackward, the same buffers and
 * `delta` scratch) on tensor cores: dO scaled by a power of two that keeps every scaled
 * dS inside f16's range (shaders/grad_scale.wgsl product_scale over dO and v), q, k, v,
 * dO, P and dS rounded to f16, f32 sums. q, k, v and dO bind as vec4 arrays, so their
 * sizes must be multiples of 16 bytes (the pool's are).
 */
export function attentionBackwardTensor(
  rt: Runtime, d: AttentionDims,
  q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, padLeft: GPUBuffer | null,
  o: GPUBuffer, dO: GPUBuffer, lse: GPUBuffer, delta: GPUBuffer, grads: AttentionGrads,
): void {
  const missing = tensorBackwardMissing(rt, d.hd);
  if (missing) throw new Error(`attention: ${missing}`);
  const sgs = tensorBackwardSubgroups(rt.gpu.limits, d.hd)!;
  const rows = sgs * 16;
  attentionDelta(rt, d, o, dO, delta);
  const work = [rt.pool.acquire(8), rt.pool.acquire(8)];
  const sigma = rt.pool.acquire(8);
  productScale(rt, dO, d.b * d.hq * d.tq * d.hd, v, d.b * d.hkv * d.sCap * d.hd, 2 * d.hd, work[0], work[1], sigma);
  const p = attentionParams(d, !!padLeft).u;
  const pad = padLeft ?? q;
  const constants = { HD: d.hd, SGS: sgs };
  if (grads.dq) {
    rt.dispatch(rt.kernel('attention_tensor_backward', 'backward_dq_tensor', constants), [q, k, v, pad, dO, lse, delta, grads.dq, null, sigma], p,
      [Math.ceil(d.tq / rows), d.hq, d.b]);
  }
  kvGradsPerQueryHead(rt, d, grads, (partK, partV) => {
    rt.dispatch(rt.kernel('attention_tensor_backward', 'backward_dkv_tensor', constants), [q, k, v, pad, dO, lse, delta, partK, partV, sigma], p,
      [Math.ceil(d.s / rows), d.hq, d.b]);
  });
  for (const b of [...work, sigma]) rt.pool.release(b);
}
