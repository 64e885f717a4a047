// Launchers for shaders/embedding.wgsl, and the CPU grouping of positions by token id
// that lets the weight gradient be summed without float atomics.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, gridRows, uniforms } from './launch.ts';

const WG = 256;

function params(n: number, h: number, vocab: number, colBlocks = 0): Uint32Array {
  const p = uniforms(4);
  p.u[0] = n;
  p.u[1] = h;
  p.u[2] = vocab;
  p.u[3] = colBlocks;
  return p.u;
}

/** out [tokens, h] = weight [vocab, h] rows picked by ids (i32, `tokens` of them). */
export function gather(rt: Runtime, weight: GPUBuffer, ids: GPUBuffer, out: GPUBuffer, tokens: number, h: number, vocab: number): void {
  const n = tokens * h;
  rt.dispatch(rt.kernel('embedding', 'gather'), [weight, ids, out], params(n, h, vocab), grid1d(n));
}

/**
 * Positions grouped by token id, packed as the grad kernel reads it: sorted unique ids,
 * `unique + 1` offsets into the position list, then the positions (ascending within
 * each id, so the summation order is fixed).
 */
export interface GradPlan {
  unique: number;
  data: Uint32Array;
}

export function planByToken(ids: ArrayLike<number>): GradPlan {
  const n = ids.length;
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  order.sort((a, b) => ids[a] - ids[b] || a - b);
  let unique = 0;
  for (let k = 0; k < n; k++) if (k === 0 || ids[order[k]] !== ids[order[k - 1]]) unique++;
  const data = new Uint32Array(2 * unique + 1 + n);
  let u = 0;
  for (let k = 0; k < n; k++) {
    if (k === 0 || ids[order[k]] !== ids[order[k - 1]]) {
      data[u] = ids[order[k]];
      data[unique + u] = k;
      u++;
    }
  }
  data[2 * unique] = n;
  data.set(order, 2 * unique + 1);
  return { unique, data };
}

/**
 * dweight rows of the ids in `plan` = sums of their positions' rows of g [tokens, h].
 * Other rows of dweight are left as they are (the caller zeroes it).
 */
export function grad(rt: Runtime, g: GPUBuffer, plan: GPUBuffer, unique: number, dweight: GPUBuffer, h: number, vocab: number): void {
  const colBlocks = Math.ceil(h / WG);
  rt.dispatch(rt.kernel('embedding', 'grad'), [g, plan, dweight], params(unique, h, vocab, colBlocks), gridRows(unique * colBlocks));
}
