// Launchers for shaders/reduce.wgsl: reduce the middle axis of [outer, r, inner].

import type { ReducePolicy } from '../gpu/kernel_policy.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, gridRows, uniforms } from './launch.ts';

export const REDUCE_OPS = { sum: 0, max: 1, mean: 2 } as const;
export type ReduceOp = keyof typeof REDUCE_OPS;

/** Parts of R for a reduce_cols over [outer, r, inner] on a real GPU under `policy` (1: not cut). */
export function reduceColsParts(outer: number, r: number, inner: number, policy: ReducePolicy): number {
  const blocks = outer * Math.ceil(inner / 32);
  if (blocks >= policy.minWorkgroups) return 1;
  const parts = Math.min(Math.ceil(policy.targetWorkgroups / blocks), Math.floor(r / policy.minSpan));
  return parts < 2 ? 1 : parts;
}

export function reduce(rt: Runtime, op: ReduceOp, x: GPUBuffer, y: GPUBuffer, outer: number, r: number, inner: number): void {
  if (inner === 1) {
    rt.dispatch(rt.kernel('reduce', 'reduce_rows', { OP: REDUCE_OPS[op] }), [x, y], params(outer, r, 1, r), gridRows(outer));
    return;
  }
  const parts = rt.caps.compatibility ? 1 : reduceColsParts(outer, r, inner, rt.policy.reduce);
  if (parts === 1) reduceCols(rt, op, x, y, outer, r, inner, 1);
  else reduceColsInParts(rt, op, x, y, outer, r, inner, parts);
}

/**
 * reduce_cols with R cut into `parts` (at most r; fewer where equal spans of
 * ceil(r / parts) rows cover R sooner, so no part is empty): each part's result into
 * pooled scratch [outer, parts, inner], then those combined into y (a mean's parts are
 * already scaled by 1/r, so they are summed).
 */
export function reduceColsInParts(rt: Runtime, op: ReduceOp, x: GPUBuffer, y: GPUBuffer, outer: number, r: number, inner: number, parts: number): void {
  const span = Math.ceil(r / parts);
  const used = Math.ceil(r / span);
  const scratch = rt.pool.acquire(outer * used * inner * 4);
  reduceCols(rt, op, x, scratch, outer, r, inner, used);
  reduceCols(rt, op === 'mean' ? 'sum' : op, scratch, y, outer, used, inner, 1);
  rt.pool.release(scratch);
}

function reduceCols(rt: Runtime, op: ReduceOp, x: GPUBuffer, y: GPUBuffer, outer: number, r: number, inner: number, parts: number): void {
  // 32 columns per workgroup (COL_LANES in the shader).
  const [gx, gy] = grid1d(outer * Math.ceil(inner / 32), 1);
  rt.dispatch(rt.kernel('reduce', 'reduce_cols', { OP: REDUCE_OPS[op] }), [x, y], params(outer, r, inner, Math.ceil(r / parts)), [gx, gy, parts]);
}

function params(outer: number, r: number, inner: number, span: number): Uint32Array {
  const p = uniforms(4);
  p.u.set([outer, r, inner, span]);
  return p.u;
}
