// Which tile and which cut of k an f32 product runs on when the caller forces
// neither: the skinny path for a few rows by a weight on real GPUs, the uniform panels
// on the software GPU where they pay, otherwise the workgroup tile and cut that
// measured fastest for the shape's class on the H200 (docs/RESULTS.md).

import type { MatmulLayoutName, MatmulPolicy } from '../../gpu/kernel_policy.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { layoutName, plainOutput, type StreamKPlan, type TileArgs } from './args.ts';
import { skinnyFits } from './skinny.ts';
import { planStreamK, splitRuns } from './split_k.ts';
import {
  MATMUL_TILES, PANEL_KC, PANEL_TILE, packedBytes, panelShape, SKINNY_TILE, tileFits, tileShape, wholeTiles,
  type MatmulTile, type WorkgroupTile,
} from './tiles.ts';

// Measured on the H200 (bench, 2026-12-01, after the kernel's rewrite: one stage, k
// unrolled, values passed rather than pointers): 128x128/k16 led 128x128/k8 on every
// shape (39.3 against 36.6 TFLOP/s at 4096^3, 43.2 against 40.8 on the LM head) and
// the 64-tile from 2048^3 up; the 64-tile leads on 1024^3 (18.3 against 14.8) and the
// MLP weight gradients (26.8 against 24.4), grids of one to two waves of the larger
// tile, but in training those are cut along K (split_k.ts). 128x256/k16 (8x16
// per thread) leads on plain outputs of the plain layout (policy.matmul.wideLayouts).
// 128x128/t16 (8x16 per thread, 128 threads) leads 128x128/k16. H200, f32, 4096 x 896
// outputs streamed (stream-K), TFLOP/s on t16 against k16: the MLP's dX 43.3 against
// 41.3, the LM head's dX per 8,192-row chunk 45.1 against 42.3, its dW 45.0 against
// 44.2, 4096^3 whole 45.8 against 43.2 (lab, 2026-12-01); the MLP's forward down
// projection (B transposed) 43.4, 44.5 against 43.0, 43.0 (2026-12-02, skewed tiles).
const WIDE_TILE: WorkgroupTile = '128x256/k16';
const BIG_TILE: WorkgroupTile = '128x128/t16';
const SMALL_TILE: WorkgroupTile = '64x64/k8';
const BIG_TILE_MIN_WORKGROUPS = 64;

// Software-GPU costs measured on llvmpipe (2 cores, Mesa 22.3): the tiled kernel runs
// at about 1.3 GFLOP/s of whole-tile work whatever its tile (so a 4-row product costs
// as much as a 64-row one), the panel kernel at about 8 GFLOP/s, packing at about
// 7.5 ns a float, and every dispatch costs about 100 us to record and launch.
const TILED_FLOPS = 1.3e9;
const PANEL_FLOPS = 8e9;
const PACK_SECONDS = 7.5e-9;
const DISPATCH_SECONDS = 100e-6;

export const roundUp = (x: number, to: number) => Math.ceil(x / to) * to;

function panelSeconds(m: number, n: number, k: number, batch: number): number {
  const { kc, rows } = panelShape(k);
  const chunks = Math.ceil(k / kc);
  const dispatches = batch * (2 + Math.ceil(m / rows) * Math.ceil(n / rows) * Math.ceil(chunks / 2));
  const packed = batch * (m + n) * chunks * kc;
  return dispatches * DISPATCH_SECONDS + packed * PACK_SECONDS + (2 * roundUp(m, 8) * roundUp(n, 16) * k * batch) / PANEL_FLOPS;
}

function workgroups(tile: WorkgroupTile, m: number, n: number, batch: number): number {
  const { rows, cols } = tileShape(tile);
  return Math.ceil(m / rows) * Math.ceil(n / cols) * batch;
}

function workgroupTile(rt: Runtime, m: number, n: number, k: number, batch: number, layout: MatmulLayoutName, plain: boolean): WorkgroupTile {
  if (!tileFits(rt, BIG_TILE)) return SMALL_TILE;
  const p = rt.policy.matmul;
  // A product that `main` cuts along k keeps the 128x128 tile: H200, 2026-12-01, the
  // MLP's forward down projection (B transposed) in 8 runs ran 35.0 TFLOP/s on 128x256
  // against 37.9 on 128x128, the MLP's dW 30.5 against 36.2.
  // A wide grid whose last column of tiles is partial (n = 896: 3.5 tiles of 256) gives
  // way to whole 128x128 tiles, cut along k (H200, 2026-12-01: the MLP's dX, 4096 x 896
  // x 4,864, 38.5 TFLOP/s whole on 128x256 against 40.5 in 4 runs on 128x128).
  const wide = plain && p.wideLayouts.includes(layout) && tileFits(rt, WIDE_TILE) && workgroups(WIDE_TILE, m, n, batch) >= p.wideMinWorkgroups &&
    (wholeTiles(WIDE_TILE, m, n, k) || !wholeTiles(BIG_TILE, m, n, k));
  if (wide && launcherRuns(rt, m, n, k, batch, tiledEntry(p, layout, plain, WIDE_TILE)) === 1) return WIDE_TILE;
  return workgroups(BIG_TILE, m, n, batch) >= BIG_TILE_MIN_WORKGROUPS ? BIG_TILE : SMALL_TILE;
}

/**
 * The tile the launcher uses for an m x n (x k) output repeated `batch` times: the
 * workgroup tiles, except on the software GPU (compatibility mode), which takes the
 * panel path unless its packing and dispatches cost more than its faster loads save
 * (tiny or many-batched products). `plain`: C is overwritten with no epilogue (see
 * plainOutput).
 */
export function chooseTile(rt: Runtime, m: number, n: number, batch = 1, k: number = PANEL_KC, layout: MatmulLayoutName = 'nn', plain = true): MatmulTile {
  const tile = workgroupTile(rt, m, n, k, batch, layout, plain);
  if (!rt.caps.compatibility || k === 0 || !tileFits(rt, PANEL_TILE) || packedBytes(m, k) > rt.gpu.limits.maxStorageBufferBindingSize || packedBytes(n, k) > rt.gpu.limits.maxStorageBufferBindingSize) return tile;
  const { rows, cols } = tileShape(tile);
  const tiled = DISPATCH_SECONDS + (2 * roundUp(m, rows) * roundUp(n, cols) * k * batch) / TILED_FLOPS;
  return panelSeconds(m, n, k, batch) < tiled ? PANEL_TILE : tile;
}

/** The tiled kernel's entry point for a product of `layout` on `tile` (see MatmulPolicy.originLayouts). */
export function tiledEntry(policy: MatmulPolicy, layout: MatmulLayoutName, plain: boolean, tile: WorkgroupTile): 'main' | 'main_origins' {
  return plain && tile === WIDE_TILE && policy.originLayouts.includes(layout) ? 'main_origins' : 'main';
}

/**
 * Runs of k the launcher cuts a product on `entry` into when nothing is forced: split-K
 * (split_k.ts) runs on `main`, whose SPLIT_K form kept its speed where
 * `main_origins`' did not, for one batch on real GPUs. The operands' alignment (n, the
 * bound offsets) is checked where they are bound (matmul).
 */
export function launcherRuns(rt: Runtime, m: number, n: number, k: number, batch: number, entry: 'main' | 'main_origins'): number {
  return entry === 'main' && batch === 1 && !rt.caps.compatibility ? splitRuns(m, n, k, rt.policy.splitK) : 1;
}

/**
 * How the launcher cuts k for a product on `tile` whose tile it chose, one batch with
 * its operands at their origin: stream-K where planStreamK says, else runs where
 * launcherRuns says (real GPUs only; the software GPU's tiled products stay whole).
 */
export function autoCut(rt: Runtime, tile: WorkgroupTile, entry: 'main' | 'main_origins', m: number, n: number, k: number, batch: number): { runs: number; stream?: StreamKPlan } {
  if (rt.caps.compatibility) return { runs: 1 };
  const cfg = MATMUL_TILES[tile];
  const { rows, cols } = tileShape(tile);
  const stream = k > 0 ? planStreamK(Math.ceil(m / rows) * Math.ceil(n / cols), Math.ceil(k / cfg.BK), cfg.resident, rt.policy.streamK) : undefined;
  return stream ? { runs: 1, stream } : { runs: launcherRuns(rt, m, n, k, batch, entry) };
}

/** The tile `matmul` uses for these arguments when none is forced. */
export function autoTile(rt: Runtime, args: TileArgs): MatmulTile {
  // The software GPU keeps its panel path: there every product is bound by loads, not
  // by how many cores stream B.
  const p = rt.policy.matmul;
  const maxRows = args.n <= p.narrowMaxColumns ? p.skinnyMaxRowsNarrow : p.skinnyMaxRows;
  if (!rt.caps.compatibility && args.m <= maxRows && skinnyFits(args) && tileFits(rt, SKINNY_TILE)) return SKINNY_TILE;
  return chooseTile(rt, args.m, args.n, args.batch ?? 1, args.k, layoutName(!!args.transA, !!args.transB), plainOutput(args));
}
