// Launcher for shaders/half.wgsl: f32 values packed into f16 pairs.

import { GpuError } from '../device/errors.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

/** dst [n / 2] u32 = src [n] f32 as f16 pairs (element 2i in the low half of word i); n even. */
export function packF16(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, n: number): void {
  if (!Number.isInteger(n) || n < 0 || n % 2 !== 0) throw new GpuError(`packF16: n = ${n} must be an even count`);
  const p = uniforms(4);
  p.u[0] = n / 2;
  rt.dispatch(rt.kernel('half', 'pack_f16'), [src, dst], p.u, grid1d(n / 2));
}
