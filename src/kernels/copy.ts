// Launchers for shaders/copy.wgsl (dtype-agnostic strided copies).

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, MAX_RANK, uniforms } from './launch.ts';

interface Strided {
  shape: number[];
  stride: number[];
  offset: number;
  /** Moved as vec4s: shape's last dim, the strides and the offset in units of 4 elements. */
  wide: boolean;
}

/**
 * The same copy in fewer index steps: dims of size 1 dropped, neighbours merged where
 * the strided side stays contiguous across them, then 4 elements a move where the last
 * dim runs contiguously in whole 16-byte words (every stride and the offset multiples of 4).
 */
export function simplifyStrided(shape: readonly number[], stride: readonly number[], offset: number): Strided {
  const dims: [number, number][] = [];
  shape.forEach((n, d) => {
    if (n === 1) return;
    const last = dims[dims.length - 1];
    if (last && last[1] === stride[d] * n) {
      last[0] *= n;
      last[1] = stride[d];
    } else {
      dims.push([n, stride[d]]);
    }
  });
  const out = { shape: dims.map((d) => d[0]), stride: dims.map((d) => d[1]), offset, wide: false };
  const r = dims.length - 1;
  if (r >= 0 && out.stride[r] === 1 && out.shape[r] % 4 === 0 && offset % 4 === 0 && out.stride.every((s, d) => d === r || s % 4 === 0)) {
    out.shape[r] /= 4;
    out.stride = out.stride.map((s, d) => (d === r ? 1 : s / 4));
    out.offset = offset / 4;
    out.wide = true;
  }
  return out;
}

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

// One strided copy on `entry` ('gather' or 'scatter'), simplified first, its vec4 form where that applies.
function strided(rt: Runtime, entry: 'gather' | 'scatter', src: GPUBuffer, dst: GPUBuffer, shape: readonly number[], stride: readonly number[], offset: number): void {
  const s = simplifyStrided(shape, stride, offset);
  const { n, u } = pack(s.shape, s.stride, s.offset);
  rt.dispatch(rt.kernel('copy', s.wide ? `${entry}4` : entry), [src, dst], u, grid1d(n));
}

/** dst (contiguous, `shape`) = src read at offset + coord·stride. */
export function gather(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, shape: readonly number[], srcStride: readonly number[], srcOffset = 0): void {
  strided(rt, 'gather', src, dst, shape, srcStride, srcOffset);
}

/** dst at offset + coord·stride = src (contiguous, `shape`). */
export function scatter(rt: Runtime, src: GPUBuffer, dst: GPUBuffer, shape: readonly number[], dstStride: readonly number[], dstOffset = 0): void {
  strided(rt, 'scatter', src, dst, shape, dstStride, dstOffset);
}
