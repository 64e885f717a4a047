// Launchers for shaders/logprob.wgsl: per-chunk token log-prob / entropy statistics
// and the logits gradient they imply.

import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, gridRows, uniforms } from './launch.ts';

const FIRST = 1;
const LAST = 2;
const ENTROPY = 4;

/** Bytes of the per-row running state (max, sum of exp, entropy term, target logit). */
export const STATE_BYTES_PER_ROW = 16;

export interface ChunkShape {
  /** Token rows. */
  rows: number;
  /** Columns in this chunk (the row stride of the chunk's logits). */
  width: number;
  /** Vocabulary index of the chunk's first column. */
  col0: number;
  /** 1 / temperature. */
  invT: number;
  entropy: boolean;
}

function params(s: ChunkShape, flags: number): Uint32Array {
  const p = uniforms(8);
  p.u[0] = s.rows;
  p.u[1] = s.width;
  p.u[2] = s.col0;
  p.u[3] = flags | (s.entropy ? ENTROPY : 0);
  p.setF(4, s.invT);
  p.u[5] = 0x7fc00000;
  return p.u;
}

/**
 * How `stats` spreads a row: one 256-wide workgroup (real GPUs), or one invocation
 * (the software GPU, where workgroup-memory merges cost more than the row itself).
 */
export type StatsLayout = 'workgroup' | 'invocation';

export const statsLayout = (rt: Runtime): StatsLayout => (rt.caps.compatibility ? 'invocation' : 'workgroup');

/**
 * Merges one chunk of logits [rows, width] into `state`; the last chunk writes the
 * log-probs to `out` (and the entropies after them when `entropy`).
 */
export function logprobStats(
  rt: Runtime, logits: GPUBuffer, targets: GPUBuffer, state: GPUBuffer, out: GPUBuffer,
  shape: ChunkShape, first: boolean, last: boolean, layout = statsLayout(rt),
): void {
  const flags = (first ? FIRST : 0) | (last ? LAST : 0);
  const buffers = [logits, targets, state, out];
  if (layout === 'invocation') rt.dispatch(rt.kernel('logprob', 'stats_rows'), buffers, params(shape, flags), grid1d(shape.rows, 64));
  else rt.dispatch(rt.kernel('logprob', 'stats'), buffers, params(shape, flags), gridRows(shape.rows));
}

/**
 * Gradient of the chunk's logits from the final `state` and the output gradient
 * `grad` (log-probs, then entropies when `entropy`). Without `dlogits` it overwrites
 * `logits`.
 */
export function logprobGrad(
  rt: Runtime, logits: GPUBuffer, targets: GPUBuffer, state: GPUBuffer, grad: GPUBuffer,
  shape: ChunkShape, dlogits?: GPUBuffer,
): void {
  const grid = grid1d(shape.rows * shape.width);
  if (dlogits) rt.dispatch(rt.kernel('logprob', 'grad'), [logits, targets, state, grad, dlogits], params(shape, 0), grid);
  else rt.dispatch(rt.kernel('logprob', 'grad_inplace'), [logits, targets, state, grad], params(shape, 0), grid);
}
