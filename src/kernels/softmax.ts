// Launchers for shaders/softmax.wgsl: softmax / log-softmax over rows of length n.

import type { Runtime } from '../gpu/runtime.ts';
import { gridRows, uniforms } from './launch.ts';

function params(rows: number, n: number): Uint32Array {
  const p = uniforms(4);
  p.u[0] = rows;
  p.u[1] = n;
  return p.u;
}

/** y = softmax(x) or, with `log`, y = log_softmax(x), per row of [rows, n]. */
export function softmaxForward(rt: Runtime, x: GPUBuffer, y: GPUBuffer, rows: number, n: number, log: boolean): void {
  rt.dispatch(rt.kernel('softmax', 'forward', { LOG: log ? 1 : 0 }), [x, y], params(rows, n), gridRows(rows));
}

/** dx from the forward's output y and the output gradient g. */
export function softmaxBackward(rt: Runtime, y: GPUBuffer, g: GPUBuffer, dx: GPUBuffer, rows: number, n: number, log: boolean): void {
  rt.dispatch(rt.kernel('softmax', 'backward', { LOG: log ? 1 : 0 }), [y, g, dx], params(rows, n), gridRows(rows));
}
