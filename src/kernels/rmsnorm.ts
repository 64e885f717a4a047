// Launchers for shaders/rmsnorm.wgsl: x viewed as [rows, h], weight [h], rstd [rows].

import type { Runtime } from '../gpu/runtime.ts';
import { gridRows, uniforms } from './launch.ts';
import { reduce } from './reduce.ts';

/** Rows summed by one workgroup of the dweight column reduction before the final pass. */
export const DW_ROWS_PER_BLOCK = 32;

// Narrow rows (q/k-norm over a 64- or 128-wide head) would leave most of a 256-wide
// workgroup idle.
function width(h: number): number {
  return h <= 64 ? 64 : h <= 128 ? 128 : 256;
}

function params(rows: number, h: number, eps: number, colBlocks = 0): Uint32Array {
  const p = uniforms(5);
  p.u[0] = rows;
  p.u[1] = h;
  p.setF(2, eps);
  p.u[3] = DW_ROWS_PER_BLOCK;
  p.u[4] = colBlocks;
  return p.u;
}

export function forward(rt: Runtime, x: GPUBuffer, w: GPUBuffer, y: GPUBuffer, rstd: GPUBuffer, rows: number, h: number, eps: number): void {
  rt.dispatch(rt.kernel('rmsnorm', 'forward', { WG: width(h) }), [x, w, y, rstd], params(rows, h, eps), gridRows(rows));
}

export function backwardDx(rt: Runtime, x: GPUBuffer, w: GPUBuffer, g: GPUBuffer, rstd: GPUBuffer, dx: GPUBuffer, rows: number, h: number): void {
  rt.dispatch(rt.kernel('rmsnorm', 'backward_dx', { WG: width(h) }), [x, w, g, rstd, dx], params(rows, h, 0), gridRows(rows));
}

/** Row blocks of the dweight reduction, i.e. rows of its partial-sum buffer. */
export function dwBlocks(rows: number): number {
  return Math.ceil(rows / DW_ROWS_PER_BLOCK);
}

/**
 * dw [h] = sum over rows of g * x * rstd. `partial` holds dwBlocks(rows) * h floats; it
 * is needed only when there is more than one block (a single block sums straight into dw).
 */
export function backwardDw(rt: Runtime, x: GPUBuffer, g: GPUBuffer, rstd: GPUBuffer, partial: GPUBuffer | null, dw: GPUBuffer, rows: number, h: number): void {
  const wg = width(h);
  const colBlocks = Math.ceil(h / wg);
  const blocks = dwBlocks(rows);
  if (blocks > 1 && !partial) throw new Error(`rmsnorm.backwardDw: ${rows} rows need a partial-sum buffer of ${blocks} x ${h}`);
  const target = blocks > 1 && partial ? partial : dw;
  rt.dispatch(rt.kernel('rmsnorm', 'backward_dw', { WG: wg }), [x, g, rstd, target], params(rows, h, 0, colBlocks), gridRows(blocks * colBlocks));
  if (target !== dw) reduce(rt, 'sum', target, dw, 1, blocks, h);
}
