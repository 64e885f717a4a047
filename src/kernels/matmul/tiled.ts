// Launcher of the tiled kernel (shaders/matmul/tiled.wgsl `main`, `main_origins`): the
// product whole, cut into runs of k summed afterwards (split-K), or with its last
// round of tiles streamed (stream-K); see split_k.ts for when each applies.

import { GpuError } from '../../device/errors.ts';
import type { Binding, Kernel, Runtime } from '../../gpu/runtime.ts';
import { grid1d, uniforms } from '../launch.ts';
import { layoutName, MATMUL_ACTS, plainEpilogue, UNCUT, vec4Rows, type MatmulAct, type MatmulCut, type ResolvedArgs, type StreamKPlan } from './args.ts';
import { autoCut, roundUp, tiledEntry } from './select.ts';
import { SPLIT_ALIGN } from './split_k.ts';
import { MATMUL_TILES, tileShape, wholeTiles, type WorkgroupTile } from './tiles.ts';

/** How the caller asked to cut k: forced runs or shares, or the launcher's choice (`auto`). */
export interface TiledCut {
  splitK?: number;
  streamK?: StreamKPlan;
  /** Neither the tile nor the runs were forced: the launcher may cut k (select.ts autoCut). */
  auto: boolean;
}

/** Records `r` on the workgroup tile `tile` (which fits this device); returns how it cut k. */
export function matmulTiled(rt: Runtime, r: ResolvedArgs, tile: WorkgroupTile, how: TiledCut): MatmulCut {
  const { a, b, out, bias, m, n, k, batch, transA, transB, strideA, strideB, strideC, offsetA, offsetB, offsetC, act, accumulate } = r;
  const aligned = (row: number, offset: number, stride: number) => vec4Rows(row, offset, stride, batch);
  const vecC = aligned(n, offsetC, strideC);
  // One batch with its operands bound at their offsets (where the device's alignment
  // allows) lets the kernel compile without base arithmetic (BASED, see the shader).
  const align = rt.gpu.limits.minStorageBufferOffsetAlignment;
  const place = (buffer: GPUBuffer, offset: number): [Binding, number] =>
    batch === 1 && offset > 0 && (offset * 4) % align === 0 ? [{ buffer, offset: offset * 4 }, 0] : [buffer, offset];
  const [bindA, offA] = place(a, offsetA);
  const [bindB, offB] = place(b, offsetB);
  const [bindC, offC] = place(out, offsetC);
  const entry = tiledEntry(rt.policy.matmul, layoutName(transA, transB), plainEpilogue(vecC, r), tile);
  const vecA = aligned(transA ? m : k, offsetA, strideA);
  const vecB = aligned(transB ? k : n, offsetB, strideB);
  const shape = tileShape(tile);
  const tilesM = Math.ceil(m / shape.rows);
  const tilesN = Math.ceil(n / shape.cols);
  const splittable = batch === 1 && n % 4 === 0 && offA === 0 && offB === 0;
  const chosen = splittable && how.auto ? autoCut(rt, tile, entry, m, n, k, batch) : undefined;
  const stream = how.streamK ?? chosen?.stream;
  const runs = how.splitK ?? (chosen && !stream ? chosen.runs : 1);
  const cut: SplitRunArgs = { a: bindA, b: bindB, bias, out: bindC, m, n, k, transA, transB, vecA, vecB, vecC, offC, act, accumulate, tilesM, tilesN };
  // With k = 0 there is nothing to cut: the whole kernel writes the epilogue of zeros.
  if (runs > 1 && k > 0) {
    if (!splittable) throw new GpuError('matmul: split-K needs one batch, n a multiple of 4, and A and B at offsets the device can bind');
    return { runs: matmulSplitRuns(rt, cut, tile, runs) };
  }
  if (stream) {
    if (!splittable) throw new GpuError('matmul: stream-K needs one batch, n a multiple of 4, and A and B at offsets the device can bind');
    const { tiles, shares } = stream;
    if (!(Number.isInteger(tiles) && Number.isInteger(shares) && tiles >= 1 && tiles <= tilesM * tilesN && shares > tiles)) {
      throw new GpuError(`matmul: stream-K of ${tiles} of ${tilesM * tilesN} tiles over ${shares} shares; it needs at least one tile, at most all, and more shares than tiles`);
    }
  }
  // The tiles from `first` on, whole: all of them, or those stream-K leaves.
  const recordWhole = (first: number) => {
    const [gx, gy] = grid1d(tilesM * tilesN - first, 1);
    if (gx === 0) return;
    const kernel = rt.kernel('matmul/tiled', entry, {
      ...productConstants(tile, cut),
      ...epilogueConstants(cut),
      BASED: Number(batch > 1 || offA > 0 || offB > 0 || offC > 0),
    });
    const maxZ = rt.gpu.limits.maxComputeWorkgroupsPerDimension;
    // main_origins has no bias binding; in `main` it needs a buffer even without a bias
    // (A is read-only already).
    const buffers = [bindA, bindB, entry === 'main' ? (bias ?? a) : null, bindC];
    for (let base = 0; base < batch; base += maxZ) {
      const p = uniforms(15);
      p.u.set([m, n, k, base, strideA, strideB, strideC, tilesM, tilesN, offA, offB, offC, 0, first, 0]);
      rt.dispatch(kernel, buffers, p.u, [gx, gy, Math.min(maxZ, batch - base)]);
    }
  };
  if (stream && k > 0) {
    matmulStream(rt, cut, tile, stream, () => recordWhole(stream.tiles));
    return { runs: 1, stream };
  }
  recordWhole(0);
  return UNCUT;
}

interface SplitRunArgs {
  a: Binding;
  b: Binding;
  bias?: GPUBuffer;
  out: Binding;
  m: number;
  n: number;
  k: number;
  transA: boolean;
  transB: boolean;
  vecA: boolean;
  vecB: boolean;
  vecC: boolean;
  offC: number;
  act: MatmulAct;
  accumulate: boolean;
  /** The tile's grid over C. */
  tilesM: number;
  tilesN: number;
}

/** The tile's sizes as the tiled kernel's overrides (its MATMUL_TILES entry less `resident`). */
function tileConstants(tile: WorkgroupTile): Record<string, number> {
  const { WG_X, WG_Y, BK, TN } = MATMUL_TILES[tile];
  return { WG_X, WG_Y, BK, TN };
}

/** Overrides every tiled product of `s` takes: layout, vec4 operands, whole tiles, the tile. */
function productConstants(tile: WorkgroupTile, s: Pick<SplitRunArgs, 'm' | 'n' | 'k' | 'transA' | 'transB' | 'vecA' | 'vecB'>): Record<string, number> {
  return {
    TRANS_A: Number(s.transA),
    TRANS_B: Number(s.transB),
    VEC_A: Number(s.vecA),
    VEC_B: Number(s.vecB),
    WHOLE: Number(wholeTiles(tile, s.m, s.n, s.k)),
    ...tileConstants(tile),
  };
}

/** Overrides of the epilogue (`store_c`): bias, activation, accumulation, vec4 stores. */
function epilogueConstants(e: Pick<SplitRunArgs, 'bias' | 'act' | 'accumulate' | 'vecC'>): Record<string, number> {
  return { BIAS: Number(!!e.bias), ACT: MATMUL_ACTS[e.act], ACCUM: Number(e.accumulate), VEC_C: Number(e.vecC) };
}

/** `main` for a product cut along k (`form`: runs or stream-K shares) into partial sums, without the epilogue. */
function cutProduct(rt: Runtime, r: SplitRunArgs, tile: WorkgroupTile, form: 'SPLIT_K' | 'STREAM'): Kernel {
  return rt.kernel('matmul/tiled', 'main', { ...productConstants(tile, r), VEC_C: 1, BASED: 0, [form]: 1 });
}

/**
 * One product (A and B bound at their origin) with k cut into `runs` runs: `main` with
 * SPLIT_K writes each run's partial sums into pooled scratch [runs, m, n], then
 * `split_k_sum` adds them into C with the epilogue. Returns the runs (fewer than asked
 * where whole slices of k do not make that many).
 */
function matmulSplitRuns(rt: Runtime, r: SplitRunArgs, tile: WorkgroupTile, runs: number): number {
  const { m, n, k, tilesM, tilesN } = r;
  const cfg = MATMUL_TILES[tile];
  // Runs are whole K slices of the tile (SPLIT_K's bounds assume it).
  const kc = roundUp(Math.ceil(k / runs), Math.max(SPLIT_ALIGN, cfg.BK));
  const used = Math.ceil(k / kc);
  const bytes = used * m * n * 4;
  if (bytes > rt.gpu.limits.maxStorageBufferBindingSize) {
    throw new GpuError(`matmul: ${used} split-K runs of a ${m}x${n} output need ${bytes} bytes of partial sums, over the ${rt.gpu.limits.maxStorageBufferBindingSize}-byte binding limit; ask for fewer runs`);
  }
  const partials = rt.pool.acquire(bytes, 'matmul split-K partial sums');
  const product = cutProduct(rt, r, tile, 'SPLIT_K');
  const p = uniforms(13);
  p.u.set([m, n, k, 0, 0, 0, m * n, tilesM, tilesN, 0, 0, 0, kc]);
  // The bias binding is never read without BIAS; A is read-only already.
  rt.dispatch(product, [r.a, r.b, r.a, partials], p.u, [...grid1d(tilesM * tilesN, 1), used]);
  splitKSum(rt, partials, used, r);
  rt.pool.release(partials);
  return used;
}

/** What splitKSum adds the partial sums into: C (an m x n block `offC` elements in) and its epilogue. */
export type SplitSumTarget = Pick<SplitRunArgs, 'out' | 'm' | 'n' | 'offC' | 'bias' | 'act' | 'accumulate' | 'vecC'>;

/**
 * Records C = act(sum of the `runs` partial products [runs, m, n] in `partials` + bias)
 * (C += ... with accumulate): `split_k_sum`, adding the runs in order. n must be a
 * multiple of 4. The tensor-core kernel's runs (tensor.ts) end here too.
 */
export function splitKSum(rt: Runtime, partials: GPUBuffer, runs: number, c: SplitSumTarget): void {
  const { m, n } = c;
  if (n % 4 !== 0) throw new GpuError(`matmul: the split-K sum needs n a multiple of 4, got ${n}`);
  const sum = rt.kernel('matmul/tiled', 'split_k_sum', epilogueConstants(c));
  const q = uniforms(13);
  q.u.set([m, n, runs, 0, 0, 0, 0, 0, 0, 0, 0, c.offC, 0]);
  rt.dispatch(sum, [partials, null, c.bias ?? partials, c.out], q.u, grid1d((m * n) / 4, 256));
}

/**
 * Stream-K (shaders/matmul/tiled.wgsl, `main` with STREAM): the first plan.tiles tiles' K
 * slices, laid end to end, cut into plan.shares equal shares, each written as one or two
 * partial tiles into pooled scratch; then `whole` records the other tiles; then
 * `stream_k_sum` adds each streamed tile's partial tiles into C with the epilogue.
 */
function matmulStream(rt: Runtime, r: SplitRunArgs, tile: WorkgroupTile, plan: StreamKPlan, whole: () => void): void {
  const cfg = MATMUL_TILES[tile];
  const { rows, cols } = tileShape(tile);
  const bytes = 2 * plan.shares * rows * cols * 4;
  if (bytes > rt.gpu.limits.maxStorageBufferBindingSize) {
    throw new GpuError(`matmul: stream-K over ${plan.shares} shares needs ${bytes} bytes of partial tiles, over the ${rt.gpu.limits.maxStorageBufferBindingSize}-byte binding limit; ask for fewer shares`);
  }
  const partials = rt.pool.acquire(bytes, 'matmul stream-K partial tiles');
  const slices = Math.ceil(r.k / cfg.BK);
  // One uniform for both dispatches: the product never reads offset_c.
  const p = uniforms(15);
  p.u.set([r.m, r.n, r.k, 0, 0, 0, 0, r.tilesM, r.tilesN, 0, 0, r.offC, Math.ceil((plan.tiles * slices) / plan.shares), 0, plan.tiles]);
  // The bias binding is never read without BIAS; A is read-only already.
  rt.dispatch(cutProduct(rt, r, tile, 'STREAM'), [r.a, r.b, r.a, partials], p.u, [...grid1d(plan.shares, 1), 1]);
  whole();
  const sum = rt.kernel('matmul/tiled', 'stream_k_sum', { ...epilogueConstants(r), ...tileConstants(tile) });
  rt.dispatch(sum, [partials, null, r.bias ?? partials, r.out], p.u, grid1d((plan.tiles * rows * cols) / 4, 256));
  rt.pool.release(partials);
}
