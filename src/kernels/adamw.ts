// Launchers for shaders/adamw.wgsl: the fused AdamW update and the per-tensor partial
// sums of squares behind the global gradient norm.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

/** Elements one workgroup of `sumsq` reduces (WG * PER_THREAD in the shader). */
export const SUMSQ_CHUNK = 4096;

export interface AdamWStepParams {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based count of steps taken, this one included. */
  step: number;
  gradScale: number;
}

/** Uniforms of one AdamW step, bias corrections in f64 (shared by every parameter). */
export function stepParams(s: AdamWStepParams): Uint32Array {
  const p = uniforms(10);
  p.setF(3, 1 - s.lr * s.weightDecay);
  p.setF(4, s.beta1);
  p.setF(5, s.beta2);
  p.setF(6, s.lr / (1 - s.beta1 ** s.step));
  p.setF(7, Math.sqrt(1 - s.beta2 ** s.step));
  p.setF(8, s.eps);
  p.setF(9, s.gradScale);
  return p.u;
}

/** In place: param, m and v of n elements from grad. `params` comes from stepParams. */
export function step(rt: Runtime, params: Uint32Array, param: GPUBuffer, grad: GPUBuffer, m: GPUBuffer, v: GPUBuffer, n: number): void {
  const u = Uint32Array.from(params);
  u[0] = n;
  rt.dispatch(rt.kernel('adamw', 'step'), [param, grad, m, v], u, grid1d(n));
}

export function sumsqPartialCount(n: number): number {
  return Math.ceil(n / SUMSQ_CHUNK);
}

/**
 * partials[offset, offset + sumsqPartialCount(n)) = sums of squares of x's chunks, and
 * the same slots past `total` = their counts of NaN and infinite elements.
 */
export function sumsq(rt: Runtime, x: GPUBuffer, n: number, partials: GPUBuffer, offset: number, total: number): void {
  const p = uniforms(3);
  p.u[0] = n;
  p.u[1] = offset;
  p.u[2] = total;
  rt.dispatch(rt.kernel('adamw', 'sumsq'), [x, partials], p.u, grid1d(n, SUMSQ_CHUNK));
}
