// Launcher for shaders/half.wgsl: f32 values packed into f16 pairs.

import { GpuError } from '../device/errors.ts';
import { bufferSize } from '../gpu/buffer_pool.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

/**
 * dst [dstWord, dstWord + n / 2) u32 = src [n] f32 as f16 pairs (element 2i in the low
 * half of word dstWord + i); n even.
 */
export function packF16(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, n: number, dstWord = 0): void {
  if (!Number.isInteger(n) || n < 0 || n % 2 !== 0) throw new GpuError(`packF16: n = ${n} must be an even count`);
  if (!Number.isInteger(dstWord) || dstWord < 0) throw new GpuError(`packF16: dstWord = ${dstWord} must be a non-negative integer`);
  if (4 * (dstWord + n / 2) > bufferSize(dst)) throw new GpuError(`packF16: words ${dstWord}..${dstWord + n / 2} do not fit the destination's ${bufferSize(dst)} bytes`);
  const p = uniforms(4);
  p.u[0] = n / 2;
  p.u[1] = dstWord;
  rt.dispatch(rt.kernel('half', 'pack_f16'), [src, dst], p.u, grid1d(n / 2));
}
