// Launchers for shaders/swiglu.wgsl (contiguous tensors of n elements each).

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

function params(n: number): Uint32Array {
  const p = uniforms(1);
  p.u[0] = n;
  return p.u;
}

export function forward(rt: Runtime, gate: GPUBuffer, up: GPUBuffer, y: GPUBuffer, n: number): void {
  rt.dispatch(rt.kernel('swiglu', 'forward'), [gate, up, y], params(n), grid1d(n));
}

export function backward(rt: Runtime, gate: GPUBuffer, up: GPUBuffer, g: GPUBuffer, dgate: GPUBuffer, dup: GPUBuffer, n: number): void {
  rt.dispatch(rt.kernel('swiglu', 'backward'), [gate, up, g, dgate, dup], params(n), grid1d(n));
}
