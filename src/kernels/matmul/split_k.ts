// Split-K for products whose output is too small to occupy the GPU. A weight gradient
// dW = dY^T X has the weight's m x n (256 x 256 for the bundled household model: four
// 128x128 workgroups) and k = the tokens of a micro-batch (32,768), so one workgroup
// per output tile walked all of k while the rest of the GPU idled: on the H200 those
// products took 125 of the bundled model's 302 ms training step. Split, k is cut into
// runs whose partial sums [runs, m, n] are added up afterwards.
//
// Three forms:
// - Stream-K, on the f32 tiled kernel (STREAM in shaders/matmul/tiled.wgsl): where whole
//   tiles would leave much of the GPU idle (fewer tiles than it runs at once, or a
//   mostly empty last round), those tiles' K slices are laid end to end and shared
//   evenly between one round of workgroups; `stream_k_sum` adds each tile's partial
//   tiles and applies the epilogue. The launcher (tiled.ts) takes it where planStreamK
//   says, on real GPUs.
// - Runs, on the same kernel (SPLIT_K): workgroup z of one dispatch walks run z of k,
//   addressed through the operands' full row lengths, so every layout splits, and
//   `split_k_sum` adds the runs and applies the epilogue (bias, activation,
//   accumulation). The launcher takes it where splitRuns says and stream-K does not
//   apply, or where a caller asks for runs.
// - The tensor-core kernel runs the chunks as the batches of one batched product, which
//   only the weight-gradient layout allows (transA, not transB: a chunk of k is a
//   contiguous run of rows of both operands, addressed with an offset and a stride),
//   then one column reduction adds them into the output (matmulSplitK).

import type { SplitKPolicy, StreamKPolicy } from '../../gpu/kernel_policy.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { reduce } from '../reduce.ts';
import type { MatmulArgs, StreamKPlan } from './args.ts';

/**
 * Stream-K for an output of `tiles` tiles of `slices` K slices each on a tile that runs
 * `resident` workgroups per multiprocessor: the tiles left over by the full rounds of
 * workgroups (all of them for an output smaller than one round) are laid end to end by
 * their slices and shared evenly between up to one round of workgroups, each share at
 * most one tile long (so it touches at most two tiles); the rest run whole. Undefined
 * where whole tiles fill the GPU well enough, or where the shares would not be short
 * enough against a whole tile to pay for themselves (StreamKPolicy.shareCostSlices).
 * H200, f32 (lab, 2026-12-01), 4096 x 896 outputs (0.85 of a round of 128x128 tiles)
 * against their best split into runs: the MLP's forward down projection 42.4 against
 * 40.0 TFLOP/s, its dX 43.3 against 42.3, the LM head's dX per 8,192-row chunk 45.1
 * against 44.5; weight gradients of 266 and 448 tiles (a round and 2 or 184 tiles)
 * 41.6-45.0 against 37.9-42.2 in 8 runs.
 */
export function planStreamK(tiles: number, slices: number, resident: number, policy: StreamKPolicy): StreamKPlan | undefined {
  const round = policy.multiprocessors * resident;
  const rounds = tiles / round;
  const rest = tiles % round;
  if (rest === 0 || (Math.ceil(rounds) - rounds) / Math.ceil(rounds) < policy.minIdle) return undefined;
  const shares = Math.min(round, Math.floor((rest * slices) / policy.minShareSlices));
  // A share per tile or fewer would be the whole tiles again.
  if (shares <= rest) return undefined;
  if (slices - Math.ceil((rest * slices) / shares) < policy.shareCostSlices * resident) return undefined;
  return { tiles: rest, shares };
}

/** Output edge of the tile the estimate counts workgroups in. */
const TILE_EDGE = 128;
/**
 * Chunk lengths are multiples of this, keeping every chunk's offsets vec4-aligned and
 * (in the f32 kernel's own split) every run a whole number of K slices.
 */
export const SPLIT_ALIGN = 16;

export interface SplitKPlan {
  /** Partial sums: `full` chunks of `kc`, plus one of `rest` when rest > 0. */
  chunks: number;
  kc: number;
  full: number;
  rest: number;
}

type SplitKTargets = Pick<SplitKPolicy, 'targetWorkgroups' | 'minChunk' | 'maxChunks'>;

/** A split-K policy's targets for the tensor-core kernel's batched chunks. */
export function tensorSplitTargets(policy: SplitKPolicy): SplitKTargets {
  return { ...policy, targetWorkgroups: policy.tensorTargetWorkgroups };
}

const tilesOf = (m: number, n: number) => Math.ceil(m / TILE_EDGE) * Math.ceil(n / TILE_EDGE);

/** Runs of k the f32 kernel cuts an m x n (x k) product into under `policy` (1: whole). */
export function splitRuns(m: number, n: number, k: number, policy: SplitKPolicy): number {
  const tiles = tilesOf(m, n);
  if (tiles >= policy.maxTiles) return 1;
  const runs = Math.min(Math.max(policy.runs, Math.ceil(policy.targetWorkgroups / Math.max(tiles, 1))), Math.floor(k / policy.minChunk), policy.maxChunks);
  return runs < 2 ? 1 : runs;
}

/** How to cut k for an m x n output into batched chunks (the tensor-core kernel; chunks 1: no split). */
export function planSplitK(m: number, n: number, k: number, policy: SplitKTargets): SplitKPlan {
  const tiles = tilesOf(m, n);
  const wanted = Math.min(Math.ceil(policy.targetWorkgroups / Math.max(tiles, 1)), Math.floor(k / policy.minChunk), policy.maxChunks);
  if (wanted < 2) return { chunks: 1, kc: k, full: 1, rest: 0 };
  const kc = Math.ceil(k / wanted / SPLIT_ALIGN) * SPLIT_ALIGN;
  const full = Math.floor(k / kc);
  const rest = k - full * kc;
  return { chunks: full + (rest > 0 ? 1 : 0), kc, full, rest };
}

/**
 * Whether `args` has the layout and epilogue the batched chunks handle: transA without transB,
 * one batch, the output at offset 0 and overwritten (no bias, activation, residual or
 * accumulation), no forced tile (benchmarks time the kernels as they are).
 */
export function splitKApplies(rt: Runtime, args: MatmulArgs): boolean {
  return !rt.caps.compatibility && !!args.transA && !args.transB && (args.batch ?? 1) === 1 && !args.bias && !args.residual &&
    !args.accumulate && (args.act ?? 'none') === 'none' && (args.offsetC ?? 0) === 0 && args.tile === undefined;
}

/**
 * Records `args` through `run` cut along k as `plan` says: the chunks as batches into
 * pooled partial sums, then their sum into args.out. With one chunk it is `run(args)`.
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
 * Records `args` through `run` (the tensor-core kernel, as gradientMatmuls does for
 * every weight gradient there), cut into batched chunks (planSplitK) where
 * splitKApplies, whole otherwise.
 */
export function matmulSplitKWhereItApplies(rt: Runtime, args: MatmulArgs, run: (args: MatmulArgs) => void): void {
  matmulSplitK(rt, args, splitKApplies(rt, args) ? planSplitK(args.m, args.n, args.k, tensorSplitTargets(rt.policy.splitK)) : { chunks: 1, kc: args.k, full: 1, rest: 0 }, run);
}
