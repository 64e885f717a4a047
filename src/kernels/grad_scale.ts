// Launcher for shaders/grad_scale.wgsl: the power-of-two scales that bring a gradient
// into f16's range before the tensor-core matmul, or the tensor-core attention
// backward, rounds it.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

/** Workgroups of absmax: enough to fill a large GPU, each looping over its share. */
const MAX_WORKGROUPS = 1024;

/**
 * Records scale = [s, 1 / s] (f32 [2] in `scale`) for the first `n` f32 values of `x`:
 * s a power of two with max|x| * s in [2^13, 2^14); 1 for an empty, all-zero or
 * non-finite x. `work` (8 bytes or more) is scratch.
 */
export function gradScale(rt: Runtime, x: GPUBuffer, n: number, work: GPUBuffer, scale: GPUBuffer): void {
  absmax(rt, x, n, work);
  rt.dispatch(rt.kernel('grad_scale', 'power_of_two'), [work, scale], count(n), [1]);
}

/**
 * Records scale = [s, 1 / s] for a sum of `terms` products of an element of `a` (its
 * first `na` values) and one of `b` (its first `nb`): s a power of two with
 * terms * max|a| * max|b| * s in [2^13, 2^14), so every such sum over a * s stays inside
 * f16's range; 1 where either is empty, all zeros or not finite. `workA` and `workB`
 * (8 bytes or more each) are scratch.
 */
export function productScale(rt: Runtime, a: GPUBuffer, na: number, b: GPUBuffer, nb: number, terms: number, workA: GPUBuffer, workB: GPUBuffer, scale: GPUBuffer): void {
  absmax(rt, a, na, workA);
  absmax(rt, b, nb, workB);
  rt.dispatch(rt.kernel('grad_scale', 'product_scale'), [workA, workB, scale], count(terms), [1]);
}

/** max|x| of the first `n` values and whether any is not finite, into `work` (absmax's acc). */
function absmax(rt: Runtime, x: GPUBuffer, n: number, work: GPUBuffer): void {
  rt.clear(work, 0, 8);
  if (n > 0) rt.dispatch(rt.kernel('grad_scale', 'absmax'), [x, work], count(n), grid1d(Math.min(Math.ceil(n / 256), MAX_WORKGROUPS), 1));
}

function count(n: number): Uint32Array {
  const p = uniforms(1);
  p.u[0] = n;
  return p.u;
}
