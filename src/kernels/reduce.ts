// Launchers for shaders/reduce.wgsl: reduce the middle axis of [outer, r, inner].

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, gridRows, uniforms } from './launch.ts';

export const REDUCE_OPS = { sum: 0, max: 1, mean: 2 } as const;
export type ReduceOp = keyof typeof REDUCE_OPS;

export function reduce(rt: Runtime, op: ReduceOp, x: GPUBuffer, y: GPUBuffer, outer: number, r: number, inner: number): void {
  const p = uniforms(4);
  p.u[0] = outer;
  p.u[1] = r;
  p.u[2] = inner;
  const constants = { OP: REDUCE_OPS[op] };
  if (inner === 1) rt.dispatch(rt.kernel('reduce', 'reduce_rows', constants), [x, y], p.u, gridRows(outer));
  // 32 columns per workgroup (COL_LANES in the shader).
  else rt.dispatch(rt.kernel('reduce', 'reduce_cols', constants), [x, y], p.u, grid1d(outer * Math.ceil(inner / 32), 1));
}
