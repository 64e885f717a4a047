// Launchers for shaders/copy.wgsl (dtype-agnostic strided copies).

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, MAX_RANK, uniforms } from './launch.ts';

function pack(shape: readonly number[], stride: readonly number[], offset: number) {
  if (shape.length > MAX_RANK) throw new Error(`strided copies support up to ${MAX_RANK} dims, got ${shape.length}`);
  const n = shape.reduce((x, y) => x * y, 1);
  const p = uniforms(4 + 16);
  p.u[0] = n;
  p.u[1] = shape.length;
  p.u[2] = offset;
  shape.forEach((d, i) => {
    p.u[4 + i] = d;
    p.u[12 + i] = stride[i];
  });
  return { n, u: p.u };
}

/** dst (contiguous, `shape`) = src read at offset + coord·stride. */
export function gather(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, shape: readonly number[], srcStride: readonly number[], srcOffset = 0): void {
  const { n, u } = pack(shape, srcStride, srcOffset);
  rt.dispatch(rt.kernel('copy', 'gather'), [src, dst], u, grid1d(n));
}

/** dst at offset + coord·stride = src (contiguous, `shape`). */
export function scatter(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, shape: readonly number[], dstStride: readonly number[], dstOffset = 0): void {
  const { n, u } = pack(shape, dstStride, dstOffset);
  rt.dispatch(rt.kernel('copy', 'scatter'), [src, dst], u, grid1d(n));
}
