// Split-K for products whose output is too small to occupy the GPU. A weight gradient
// dW = dY^T X has the weight's m x n (256 x 256 for the bundled household model: four
// 128x128 workgroups) and k = the tokens of a micro-batch (32,768), so one workgroup
// per output tile walked all of k while the rest of the GPU idled: on the H200 those
// products took 125 of the bundled model's 302 ms training step. Split, k is cut into
// chunks that run as the batches of one batched product into partial sums [chunks,
// m, n], then one column reduction adds them into the output.
//
// Only A stored [k, m] with B stored [k, n] (transA, not transB: the weight-gradient
// layout) splits this way: there a chunk of k is a contiguous run of rows of both
// operands, so the batched kernels address it with an offset and a stride.

import type { Runtime } from '../gpu/runtime.ts';
import type { MatmulArgs } from './matmul.ts';
import { reduce } from './reduce.ts';

export const splitKPolicy = {
  /**
   * Workgroups (128x128 output tiles, times chunks) to aim for: about eight per
   * streaming multiprocessor of an H200 (132), one workgroup of these tiles resident
   * on each at a time. A grid of a few waves loses most of a wave to its last partial
   * one: the MLP's weight gradients (266 tiles) ran 2.02 waves' work in 3 at 24-25
   * TFLOP/s; in 4 chunks they are 8.06 waves in 9. WebGPU does not say how many
   * multiprocessors a device has; on a smaller GPU the extra chunks only add partial
   * sums, a small fraction of the product's traffic.
   */
  targetWorkgroups: 1024,
  /**
   * The same for products on the tensor-core kernel, where the H200's Qwen2.5-0.5B
   * training step took 241 ms at 1024 and 233 at 256 (the f32 step: 443 and 462).
   */
  tensorTargetWorkgroups: 256,
  /** Fewest k per chunk, so each workgroup still streams a long run of k. */
  minChunk: 512,
  maxChunks: 64,
};

/** Output edge of the tile the estimate counts workgroups in. */
const TILE_EDGE = 128;
/** Chunk lengths are multiples of this, keeping every chunk's offsets vec4-aligned. */
const CHUNK_ALIGN = 16;

export interface SplitKPlan {
  /** Partial sums: `full` chunks of `kc`, plus one of `rest` when rest > 0. */
  chunks: number;
  kc: number;
  full: number;
  rest: number;
}

/** How to cut k for an m x n output under `policy` (chunks 1: no split). */
type SplitKTargets = Pick<typeof splitKPolicy, 'targetWorkgroups' | 'minChunk' | 'maxChunks'>;

/** splitKPolicy for a product on the tensor-core kernel (`tensor`) or the f32 one. */
export function splitKPolicyFor(tensor: boolean): SplitKTargets {
  return tensor ? { ...splitKPolicy, targetWorkgroups: splitKPolicy.tensorTargetWorkgroups } : splitKPolicy;
}

export function planSplitK(m: number, n: number, k: number, policy: SplitKTargets = splitKPolicy): SplitKPlan {
  const tiles = Math.ceil(m / TILE_EDGE) * Math.ceil(n / TILE_EDGE);
  const wanted = Math.min(Math.ceil(policy.targetWorkgroups / Math.max(tiles, 1)), Math.floor(k / policy.minChunk), policy.maxChunks);
  if (wanted < 2) return { chunks: 1, kc: k, full: 1, rest: 0 };
  const kc = Math.ceil(k / wanted / CHUNK_ALIGN) * CHUNK_ALIGN;
  const full = Math.floor(k / kc);
  const rest = k - full * kc;
  return { chunks: full + (rest > 0 ? 1 : 0), kc, full, rest };
}

/**
 * Whether `args` has the layout and epilogue split-K handles: transA without transB,
 * one batch, the output at offset 0 and overwritten (no bias, activation, residual or
 * accumulation), no forced tile (benchmarks time the kernels as they are).
 */
export function splitKApplies(rt: Runtime, args: MatmulArgs): boolean {
  return !rt.caps.compatibility && !!args.transA && !args.transB && (args.batch ?? 1) === 1 && !args.bias && !args.residual &&
    !args.accumulate && (args.act ?? 'none') === 'none' && (args.offsetC ?? 0) === 0 && args.tile === undefined;
}

/**
 * Records `args` through `run` (the f32 or the tensor-core kernel) cut along k as
 * `plan` says: the chunks as batches into pooled partial sums, then their sum into
 * args.out. With one chunk it is `run(args)`.
 */
export function matmulSplitK(rt: Runtime, args: MatmulArgs, plan: SplitKPlan, run: (args: MatmulArgs) => void): void {
  if (plan.chunks <= 1) {
    run(args);
    return;
  }
  const { m, n } = args;
  const offsetA = args.offsetA ?? 0;
  const offsetB = args.offsetB ?? 0;
  const partials = rt.pool.acquire(plan.chunks * m * n * 4);
  run({ ...args, out: partials, k: plan.kc, batch: plan.full, strideA: plan.kc * m, strideB: plan.kc * n, strideC: m * n, offsetC: 0 });
  if (plan.rest > 0) {
    const done = plan.full * plan.kc;
    run({ ...args, out: partials, k: plan.rest, offsetA: offsetA + done * m, offsetB: offsetB + done * n, offsetC: plan.full * m * n });
  }
  reduce(rt, 'sum', partials, args.out, 1, plan.chunks, m * n);
  rt.pool.release(partials);
}

/**
 * Records `args` through `run`, cut along k under `policy` where splitKApplies (as
 * gradientMatmuls does for every weight gradient), whole otherwise. Returns the number
 * of k chunks it ran (1: whole).
 */
export function matmulSplitKWhereItApplies(rt: Runtime, args: MatmulArgs, policy: SplitKTargets, run: (args: MatmulArgs) => void): number {
  const plan = splitKApplies(rt, args) ? planSplitK(args.m, args.n, args.k, policy) : { chunks: 1, kc: args.k, full: 1, rest: 0 };
  matmulSplitK(rt, args, plan, run);
  return plan.chunks;
}
