// Launchers for shaders/elementwise.wgsl.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, MAX_RANK, uniforms } from './launch.ts';

export const UNARY_OPS = {
  neg: 0, exp: 1, log: 2, sqrt: 3, rsqrt: 4, silu: 5, sigmoid: 6, tanh: 7, relu: 8,
  abs: 9, square: 10, recip: 11, affine: 12, clamp: 13, pow: 14,
} as const;
export type UnaryOp = keyof typeof UNARY_OPS;

export const BINARY_OPS = { add: 0, sub: 1, mul: 2, div: 3, maximum: 4, minimum: 5, eq: 6, gt: 7 } as const;
export type BinaryOp = keyof typeof BINARY_OPS;

function header(n: number, alpha = 0, beta = 0) {
  const p = uniforms(8 + 3 * 8);
  p.u[0] = n;
  p.setF(4, alpha);
  p.setF(5, beta);
  return p;
}

export function unary(rt: Runtime, op: UnaryOp, x: GPUBuffer, y: GPUBuffer, n: number, alpha = 0, beta = 0): void {
  rt.dispatch(rt.kernel('elementwise', 'unary', { OP: UNARY_OPS[op] }), [x, y], header(n, alpha, beta).u, grid1d(n));
}

export function unaryGrad(rt: Runtime, op: UnaryOp, x: GPUBuffer, g: GPUBuffer, dx: GPUBuffer, n: number, alpha = 0, beta = 0): void {
  rt.dispatch(rt.kernel('elementwise', 'unary_grad', { OP: UNARY_OPS[op] }), [x, g, dx], header(n, alpha, beta).u, grid1d(n));
}

export function fill(rt: Runtime, y: GPUBuffer, n: number, value: number): void {
  rt.dispatch(rt.kernel('elementwise', 'fill'), [y], header(n, value).u, grid1d(n));
}

/** y += alpha * x */
export function axpyInPlace(rt: Runtime, y: GPUBuffer, x: GPUBuffer, n: number, alpha = 1): void {
  rt.dispatch(rt.kernel('elementwise', 'axpy_inplace'), [x, y], header(n, alpha).u, grid1d(n));
}

/** Same-shape contiguous binary op. */
export function binary(rt: Runtime, op: BinaryOp, a: GPUBuffer, b: GPUBuffer, out: GPUBuffer, n: number): void {
  rt.dispatch(rt.kernel('elementwise', 'binary', { OP: BINARY_OPS[op] }), [a, b, out], header(n).u, grid1d(n));
}

/**
 * Broadcasting binary op. `shape` is the output shape; `sa`/`sb` the element strides
 * of a and b per output dim (0 where broadcast).
 */
export function binaryBroadcast(
  rt: Runtime, op: BinaryOp, a: GPUBuffer, b: GPUBuffer, out: GPUBuffer,
  shape: readonly number[], sa: readonly number[], sb: readonly number[],
): void {
  if (shape.length > MAX_RANK) throw new Error(`broadcasting supports up to ${MAX_RANK} dims, got ${shape.length}`);
  const n = shape.reduce((x, y) => x * y, 1);
  const p = header(n);
  p.u[1] = shape.length;
  shape.forEach((d, i) => {
    p.u[8 + i] = d;
    p.u[16 + i] = sa[i];
    p.u[24 + i] = sb[i];
  });
  rt.dispatch(rt.kernel('elementwise', 'binary_bcast', { OP: BINARY_OPS[op] }), [a, b, out], p.u, grid1d(n));
}
