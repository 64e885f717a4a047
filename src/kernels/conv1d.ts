// Launchers for shaders/conv1d.wgsl: x [B, T, C], w [C, K], state [B, K-1, C].

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';
import { reduce } from './reduce.ts';

/** Rows of [B*T] one invocation of the weight-gradient pass sums. */
export const DW_ROWS_PER_BLOCK = 64;

export interface Conv1dDims {
  b: number;
  t: number;
  c: number;
  k: number;
  silu: boolean;
  /** Absolute position of the first new token (for the padding test). */
  offset: number;
}

function params(d: Conv1dDims, n: number, hasPad: boolean, hasState: boolean): Uint32Array {
  const p = uniforms(8);
  p.u.set([n, d.b, d.t, d.c, d.k, d.offset, hasPad ? 1 : 0, hasState ? 1 : 0]);
  return p.u;
}

const constants = (d: Conv1dDims) => ({ SILU: d.silu ? 1 : 0 });

/** y = act(conv(x)); `state` (or zeros) feeds the times before the first token. */
export function forward(rt: Runtime, d: Conv1dDims, x: GPUBuffer, w: GPUBuffer, state: GPUBuffer | null, padLeft: GPUBuffer | null, y: GPUBuffer): void {
  const n = d.b * d.t * d.c;
  rt.dispatch(rt.kernel('conv1d', 'forward', constants(d)), [x, w, state ?? x, padLeft ?? x, y], params(d, n, !!padLeft, !!state), grid1d(n));
}

/** state <- the last K-1 inputs of (state, x), padding read as zeros, in place. */
export function stateUpdate(rt: Runtime, d: Conv1dDims, x: GPUBuffer, padLeft: GPUBuffer | null, state: GPUBuffer): void {
  if (d.k < 2) return;
  const n = d.b * d.c;
  rt.dispatch(rt.kernel('conv1d', 'state_update', constants(d)), [x, padLeft ?? x, state], params(d, n, !!padLeft, true), grid1d(n));
}

export function dwBlocks(d: Conv1dDims): number {
  return Math.ceil((d.b * d.t) / DW_ROWS_PER_BLOCK);
}

/**
 * dx and dw of the stateless forward. `dpre` is scratch [B, T, C]; `partial` holds
 * dwBlocks(d) * C * K floats and is needed only with more than one block.
 */
export function backward(
  rt: Runtime, d: Conv1dDims, x: GPUBuffer, w: GPUBuffer, padLeft: GPUBuffer | null, dy: GPUBuffer, dpre: GPUBuffer,
  dx: GPUBuffer | null, dw: GPUBuffer | null, partial: GPUBuffer | null,
): void {
  const n = d.b * d.t * d.c;
  const pad = padLeft ?? x;
  const hasPad = !!padLeft;
  rt.dispatch(rt.kernel('conv1d', 'backward_dpre', constants(d)), [x, w, pad, dy, dpre], params(d, n, hasPad, false), grid1d(n));
  if (dx) rt.dispatch(rt.kernel('conv1d', 'backward_dx', constants(d)), [w, pad, dpre, dx], params(d, n, hasPad, false), grid1d(n));
  if (!dw) return;
  const blocks = dwBlocks(d);
  if (blocks > 1 && !partial) throw new Error(`conv1d.backward: ${blocks} row blocks need a partial-sum buffer`);
  const target = blocks > 1 && partial ? partial : dw;
  rt.dispatch(rt.kernel('conv1d', 'backward_dw', constants(d)), [x, pad, dpre, target], params(d, blocks * d.c, hasPad, false), grid1d(blocks * d.c));
  if (target !== dw) reduce(rt, 'sum', target, dw, 1, blocks, d.c * d.k);
}
