// Launcher for shaders/grad_scale.wgsl: the power-of-two scale that brings a gradient
// into f16's range before the tensor-core matmul rounds it.

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
  const p = uniforms(1);
  p.u[0] = n;
  rt.clear(work, 0, 8);
  if (n > 0) rt.dispatch(rt.kernel('grad_scale', 'absmax'), [x, work], p.u, grid1d(Math.min(Math.ceil(n / 256), MAX_WORKGROUPS), 1));
  rt.dispatch(rt.kernel('grad_scale', 'power_of_two'), [work, scale], p.u, [1]);
}
