// Launcher for shaders/matmul.wgsl: batched C = act(op(A) @ op(B) + bias) (+= C).

import { bufferSize } from '../gpu/buffer_pool.ts';
import { GpuError } from '../gpu/errors.ts';
import type { Binding, Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';
import { SPLIT_ALIGN, planStreamK, splitRuns, type StreamKPlan } from './matmul_split_k.ts';

export const MATMUL_ACTS = { none: 0, silu: 1, gelu: 2, relu: 3 } as const;
export type MatmulAct = keyof typeof MATMUL_ACTS;

/**
 * Workgroup tile configurations: threads along N and M (each owning an 8 x TN block
 * of C, so the tile is 8*WG_Y x TN*WG_X) and the K slice (8 or 16). Workgroup memory
 * is one slice of each operand, BK x (BM + BN) floats (24 KiB for 128x256/k16).
 * `resident`: workgroups one multiprocessor of the H200 runs at once, from the
 * registers its driver's compiler gives each thread (nvdisasm of the pipeline cache:
 * 223 on 128x256, 240 on 128x128/t16's 128 threads, 126 on 128x128/k16) out of 64K;
 * stream-K (planStreamK) sizes its shares by it.
 */
export const MATMUL_TILES = {
  '128x256/k16': { WG_X: 16, WG_Y: 16, BK: 16, TN: 16, resident: 1 },
  '128x128/t16': { WG_X: 8, WG_Y: 16, BK: 16, TN: 16, resident: 2 },
  '128x128/k16': { WG_X: 16, WG_Y: 16, BK: 16, TN: 8, resident: 2 },
  '128x128/k8': { WG_X: 16, WG_Y: 16, BK: 8, TN: 8, resident: 2 },
  '64x64/k8': { WG_X: 8, WG_Y: 8, BK: 8, TN: 8, resident: 8 },
} as const;

/** Rows and columns of C one workgroup of `tile` computes. */
export function tileShape(tile: keyof typeof MATMUL_TILES): { rows: number; cols: number } {
  const { WG_X, WG_Y, TN } = MATMUL_TILES[tile];
  return { rows: 8 * WG_Y, cols: TN * WG_X };
}

/**
 * The software GPU's path (see the end of shaders/matmul.wgsl): both operands packed
 * into 64 KiB uniform-buffer panels of KC consecutive k (fewer when K is smaller).
 * Kept apart from MATMUL_TILES so that benchmarks of the workgroup tiles on real GPUs
 * stay as they were; k32 exists to test K split into many chunks.
 */
export const MATMUL_PANELS = {
  'panels/k128': { KC: 128 },
  'panels/k32': { KC: 32 },
} as const;

/**
 * The skinny path (the end of shaders/matmul.wgsl): a few rows of A by a B stored
 * [N, K], a decode step's products, streaming B at full width instead of through one
 * row of output tiles. It needs transB without transA, batch 1, and K and the A/B
 * offsets multiples of 4.
 */
export const SKINNY_TILE = 'skinny';
/** The launcher's choices that benchmarks vary to compare paths. */
export const matmulPolicy = {
  /** Rows of A up to which a real GPU takes the skinny path (0: never). */
  skinnyMaxRows: 32,
  /**
   * The same for products of at most narrowMaxColumns columns. On the H200 (bench
   * decode-matmul) 64 rows still ran 2-9x faster on the skinny path than on the tiles
   * for the Qwen2.5-0.5B projections (mlp down 83 us against 774), but the LM head
   * (151,936 columns) took 2.0 ms against the 128x128 tile's 1.2.
   */
  skinnyMaxRowsNarrow: 64,
  narrowMaxColumns: 16384,
  /**
   * Layouts (A then B, n: as stored, t: transposed) whose plain outputs (plainOutput) on
   * the 128x256 tile run `main_origins` rather than `main`. H200, f32 lab at 4096^3: the
   * plain layout ran 44.7 TFLOP/s there against 39.6 on `main`'s 128x128; B transposed
   * ran 35.0 there against 42.7 in `main`, A transposed 40.0 against 41.4 (see the
   * shader). On 128x128 the plain layout ran faster in `main` (40.0 against 37.7), and
   * `main_origins` never cuts k, so every other tile takes `main`.
   */
  originLayouts: ['nn'] as MatmulLayoutName[],
  /**
   * Layouts whose plain outputs take the 128x256 tile when its grid has at least
   * wideMinWorkgroups workgroups. Not B transposed since its tiles' k-rows are skewed
   * rather than XOR-swizzled (shaders/matmul.wgsl): H200, 2026-12-02, lab, two passes,
   * TFLOP/s on 128x128/t16 against 128x256: the MLP's up projection 4096 x 4,864 x 896
   * whole 43.5, 43.5 against 40.9, 41.6 (43.5, 42.7 streamed), an LM-head vocabulary
   * chunk 4096 x 30,464 x 896 47.4, 47.3 against 45.9, 45.7. Smaller grids of the
   * plain layout go to `main`, cut along k where splitRuns says (H200, 2026-12-01,
   * whole on `main_origins` -> in runs on `main`: 2048 x 896 x 30,464 27.2 ->
   * 34.5-38.9, 1024 x 896 x 30,464 14.2 -> 34.3, 2048 x 896 x 4,864 26.8 -> 32.0-34.7,
   * 1024^3 17.1 -> 30.4); at 128 workgroups the wide tile whole still leads (the MLP's
   * dX, 4096 x 896 x 4,864: 37.2 against 35.2 in 8 runs).
   */
  wideLayouts: ['nn'] as MatmulLayoutName[],
  wideMinWorkgroups: 96,
};

export type MatmulLayoutName = 'nn' | 'nt' | 'tn' | 'tt';

const layoutName = (transA: boolean, transB: boolean): MatmulLayoutName => `${transA ? 't' : 'n'}${transB ? 't' : 'n'}`;

type WorkgroupTile = keyof typeof MATMUL_TILES;
type PanelTile = keyof typeof MATMUL_PANELS;
export type MatmulTile = WorkgroupTile | PanelTile | typeof SKINNY_TILE;

/** The panel tile chosen on the software GPU. */
const PANEL_TILE: PanelTile = 'panels/k128';

const isPanels = (tile: MatmulTile): tile is PanelTile => tile in MATMUL_PANELS;
const isWorkgroupTile = (tile: MatmulTile): tile is WorkgroupTile => tile in MATMUL_TILES;

// Measured on the H200 (bench, 2026-12-01, after the kernel's rewrite: one stage, k
// unrolled, values passed rather than pointers): 128x128/k16 led 128x128/k8 on every
// shape (39.3 against 36.6 TFLOP/s at 4096^3, 43.2 against 40.8 on the LM head) and
// the 64-tile from 2048^3 up; the 64-tile leads on 1024^3 (18.3 against 14.8) and the
// MLP weight gradients (26.8 against 24.4), grids of one to two waves of the larger
// tile, but in training those are cut along K (matmul_split_k.ts). 128x256/k16 (8x16
// per thread) leads on plain outputs of the plain layout (matmulPolicy.wideLayouts).
// 128x128/t16 (8x16 per thread, 128 threads) leads 128x128/k16. H200, f32, 4096 x 896
// outputs streamed (stream-K), TFLOP/s on t16 against k16: the MLP's dX 43.3 against
// 41.3, the LM head's dX per 8,192-row chunk 45.1 against 42.3, its dW 45.0 against
// 44.2, 4096^3 whole 45.8 against 43.2 (lab, 2026-12-01); the MLP's forward down
// projection (B transposed) 43.4, 44.5 against 43.0, 43.0 (2026-12-02, skewed tiles).
const WIDE_TILE: WorkgroupTile = '128x256/k16';
const BIG_TILE: WorkgroupTile = '128x128/t16';
const SMALL_TILE: WorkgroupTile = '64x64/k8';
const BIG_TILE_MIN_WORKGROUPS = 64;

/**
 * Whether every tile of an m x n output and every slice of k lie inside the operands,
 * so the kernel compiles without the loads' bounds checks (the shader's WHOLE; runs of
 * k are whole slices already). H200, 2026-12-01, as trained, TFLOP/s: the LM head's dW
 * in vocabulary chunks 39.0 -> 47.0, the MLP's dW 36.4 -> 39.1-39.2, the LM head's dX
 * chunks 39.5 -> 43.0, 4096^3 44.6 -> 47.7 (docs/RESULTS.md).
 */
const wholeTiles = (tile: WorkgroupTile, m: number, n: number, k: number) => {
  const { rows, cols } = tileShape(tile);
  return m % rows === 0 && n % cols === 0 && k % MATMUL_TILES[tile].BK === 0;
};

/** Floats in one uniform-buffer panel (64 KiB, WebGPU's default binding limit). */
const PANEL_FLOATS = 16384;
const PANEL_BYTES = PANEL_FLOATS * 4;
/** Invocations per `panels` workgroup (PANEL_WG in the shader), each an 8x16 block of C. */
const PANEL_WG = 32;

export interface MatmulArgs {
  a: GPUBuffer;
  b: GPUBuffer;
  out: GPUBuffer;
  /** [n], added to every row before the activation. */
  bias?: GPUBuffer;
  m: number;
  n: number;
  k: number;
  batch?: number;
  /** A is stored [k, m] (per batch) instead of [m, k]. */
  transA?: boolean;
  /** B is stored [n, k] instead of [k, n]. */
  transB?: boolean;
  /** Elements between consecutive batches of A (0 broadcasts A); default m*k. */
  strideA?: number;
  strideB?: number;
  strideC?: number;
  /** Elements before the first batch of A (B, C); default 0. */
  offsetA?: number;
  offsetB?: number;
  offsetC?: number;
  act?: MatmulAct;
  /** out += result instead of out = result. */
  accumulate?: boolean;
  /**
   * out = residual + result, `residual` laid out like out (offsetC included): the skinny
   * tile only, which folds a decode step's residual connection into its projection.
   */
  residual?: GPUBuffer;
  /** Force a tile size (benchmarks); by default chosen from the shape and the limits. */
  tile?: MatmulTile;
  /**
   * Cut k into this many runs summed afterwards (split-K, see splitRuns); 1: whole. By
   * default the launcher's choice.
   */
  splitK?: number;
  /**
   * Stream the first `tiles` output tiles' K slices over `shares` workgroups (stream-K,
   * see planStreamK; shares more than tiles, one batch); by default the launcher's choice.
   */
  streamK?: StreamKPlan;
}

/**
 * How `matmul` cut k: into `runs` runs summed afterwards (split-K; 1: not), or its
 * first stream.tiles tiles into stream-K's shares.
 */
export interface MatmulCut {
  runs: number;
  stream?: StreamKPlan;
}

const UNCUT: MatmulCut = Object.freeze({ runs: 1 });

/** Whether the skinny kernel can compute this product (see SKINNY_TILE). */
export function skinnyFits(args: Pick<MatmulArgs, 'k' | 'batch' | 'transA' | 'transB' | 'offsetA' | 'offsetB'>): boolean {
  return !!args.transB && !args.transA && (args.batch ?? 1) === 1 && args.k % 4 === 0 && (args.offsetA ?? 0) % 4 === 0 && (args.offsetB ?? 0) % 4 === 0;
}

function workgroupBytes(tile: WorkgroupTile): number {
  const { rows, cols } = tileShape(tile);
  return MATMUL_TILES[tile].BK * (rows + cols) * 4;
}

/** Whether this device has the workgroup memory and invocations (or uniform binding size) for `tile`. */
export function tileFits(rt: Runtime, tile: MatmulTile): boolean {
  const l = rt.gpu.limits;
  // Two planes of 8 rows of partial sums (skinny_swiglu).
  if (tile === SKINNY_TILE) return 256 <= l.maxComputeInvocationsPerWorkgroup && 2 * 8 * 256 * 4 <= l.maxComputeWorkgroupStorageSize;
  if (isPanels(tile)) return PANEL_BYTES <= l.maxUniformBufferBindingSize;
  const { WG_X, WG_Y } = MATMUL_TILES[tile];
  return workgroupBytes(tile) <= l.maxComputeWorkgroupStorageSize && WG_X * WG_Y <= l.maxComputeInvocationsPerWorkgroup;
}

/** Panel geometry for a K of `k`: k per panel (a power of two, at most the tile's KC) and rows per panel. */
function panelShape(tile: PanelTile, k: number): { kc: number; rows: number } {
  const kc = Math.min(MATMUL_PANELS[tile].KC, 2 ** Math.ceil(Math.log2(Math.max(k, 4))));
  return { kc, rows: PANEL_FLOATS / kc };
}

// Software-GPU costs measured on llvmpipe (2 cores, Mesa 22.3): the tiled kernel runs
// at about 1.3 GFLOP/s of whole-tile work whatever its tile (so a 4-row product costs
// as much as a 64-row one), the panel kernel at about 8 GFLOP/s, packing at about
// 7.5 ns a float, and every dispatch costs about 100 us to record and launch.
const TILED_FLOPS = 1.3e9;
const PANEL_FLOPS = 8e9;
const PACK_SECONDS = 7.5e-9;
const DISPATCH_SECONDS = 100e-6;

const roundUp = (x: number, to: number) => Math.ceil(x / to) * to;

function panelSeconds(m: number, n: number, k: number, batch: number): number {
  const { kc, rows } = panelShape(PANEL_TILE, k);
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
  const p = matmulPolicy;
  // A product that `main` cuts along k keeps the 128x128 tile: H200, 2026-12-01, the
  // MLP's forward down projection (B transposed) in 8 runs ran 35.0 TFLOP/s on 128x256
  // against 37.9 on 128x128, the MLP's dW 30.5 against 36.2.
  // A wide grid whose last column of tiles is partial (n = 896: 3.5 tiles of 256) gives
  // way to whole 128x128 tiles, cut along k (H200, 2026-12-01: the MLP's dX, 4096 x 896
  // x 4,864, 38.5 TFLOP/s whole on 128x256 against 40.5 in 4 runs on 128x128).
  const wide = plain && p.wideLayouts.includes(layout) && tileFits(rt, WIDE_TILE) && workgroups(WIDE_TILE, m, n, batch) >= p.wideMinWorkgroups &&
    (wholeTiles(WIDE_TILE, m, n, k) || !wholeTiles(BIG_TILE, m, n, k));
  if (wide && launcherRuns(rt, m, n, k, batch, tiledEntry(layout, plain, WIDE_TILE)) === 1) return WIDE_TILE;
  return workgroups(BIG_TILE, m, n, batch) >= BIG_TILE_MIN_WORKGROUPS ? BIG_TILE : SMALL_TILE;
}

/**
 * The tile the launcher uses for an m x n (x k) output repeated `batch` times: the
 * workgroup tiles, except on the software GPU (compatibility mode), which takes the
 * panel path unless its packing and dispatches cost more than its faster loads save
 * (tiny or many-batched products). `plain`: C is overwritten with no epilogue (see
 * plainOutput).
 */
export function chooseTile(rt: Runtime, m: number, n: number, batch = 1, k: number = MATMUL_PANELS[PANEL_TILE].KC, layout: MatmulLayoutName = 'nn', plain = true): MatmulTile {
  const tile = workgroupTile(rt, m, n, k, batch, layout, plain);
  if (!rt.caps.compatibility || k === 0 || !tileFits(rt, PANEL_TILE) || packedBytes(m, k) > rt.gpu.limits.maxStorageBufferBindingSize || packedBytes(n, k) > rt.gpu.limits.maxStorageBufferBindingSize) return tile;
  const { rows, cols } = tileShape(tile);
  const tiled = DISPATCH_SECONDS + (2 * roundUp(m, rows) * roundUp(n, cols) * k * batch) / TILED_FLOPS;
  return panelSeconds(m, n, k, batch) < tiled ? PANEL_TILE : tile;
}

type TileArgs = Pick<MatmulArgs, 'm' | 'n' | 'k' | 'batch' | 'transA' | 'transB' | 'offsetA' | 'offsetB' | 'offsetC' | 'strideC' | 'bias' | 'act' | 'accumulate'>;

/**
 * Whether an operand's rows of `row` elements, starting `offset` elements in and
 * `stride` apart between batches, are whole vec4s (VEC_A, VEC_B, VEC_C).
 */
const vec4Rows = (row: number, offset: number, stride: number, batch: number) => row % 4 === 0 && offset % 4 === 0 && (batch === 1 || stride % 4 === 0);

/** Whether C, stored as vec4s (`vecC`), is overwritten with no bias, activation or accumulation. */
const plainEpilogue = (vecC: boolean, args: Pick<MatmulArgs, 'bias' | 'act' | 'accumulate'>) => vecC && !args.bias && (args.act ?? 'none') === 'none' && !args.accumulate;

/** Whether `args` has a plain output: the outputs `main_origins` and the 128x256 tile serve. */
function plainOutput(args: TileArgs): boolean {
  const batch = args.batch ?? 1;
  return plainEpilogue(vec4Rows(args.n, args.offsetC ?? 0, args.strideC ?? args.m * args.n, batch), args);
}

/** The tiled kernel's entry point for a product of `layout` on `tile` (see matmulPolicy.originLayouts). */
function tiledEntry(layout: MatmulLayoutName, plain: boolean, tile: WorkgroupTile): 'main' | 'main_origins' {
  return plain && tile === WIDE_TILE && matmulPolicy.originLayouts.includes(layout) ? 'main_origins' : 'main';
}

/**
 * Runs of k the launcher cuts a product on `entry` into when nothing is forced: split-K
 * (matmul_split_k.ts) runs on `main`, whose SPLIT_K form kept its speed where
 * `main_origins`' did not, for one batch on real GPUs. The operands' alignment (n, the
 * bound offsets) is checked where they are bound (matmul).
 */
function launcherRuns(rt: Runtime, m: number, n: number, k: number, batch: number, entry: 'main' | 'main_origins'): number {
  return entry === 'main' && batch === 1 && !rt.caps.compatibility ? splitRuns(m, n, k) : 1;
}

/** The tile `matmul` uses for these arguments when none is forced. */
export function autoTile(rt: Runtime, args: TileArgs): MatmulTile {
  // The software GPU keeps its panel path: there every product is bound by loads, not
  // by how many cores stream B.
  const p = matmulPolicy;
  const maxRows = args.n <= p.narrowMaxColumns ? p.skinnyMaxRowsNarrow : p.skinnyMaxRows;
  if (!rt.caps.compatibility && args.m <= maxRows && skinnyFits(args) && tileFits(rt, SKINNY_TILE)) return SKINNY_TILE;
  return chooseTile(rt, args.m, args.n, args.batch ?? 1, args.k, layoutName(!!args.transA, !!args.transB), plainOutput(args));
}

/** Bytes of `rows` rows of k, packed into panels for the panel tile. */
function packedBytes(rows: number, k: number, tile: PanelTile = PANEL_TILE): number {
  const { kc, rows: per } = panelShape(tile, k);
  return Math.ceil(rows / per) * Math.ceil(k / kc) * PANEL_BYTES;
}

function checkBuffer(what: string, buf: GPUBuffer, elements: number): void {
  const size = bufferSize(buf);
  if (size % 16 !== 0 || size < 16) {
    throw new GpuError(`matmul: ${what} buffer of ${size} bytes; the kernel binds vec4 arrays and needs a multiple of 16`);
  }
  if (elements * 4 > size) throw new GpuError(`matmul: ${what} needs ${elements * 4} bytes, its buffer has ${size}`);
}

const isCount = (x: number) => Number.isInteger(x) && x >= 0 && x < 2 ** 32;

type LayoutArgs = Pick<MatmulArgs, 'm' | 'n' | 'k' | 'batch' | 'transA' | 'transB' | 'strideA' | 'strideB' | 'strideC' | 'offsetA' | 'offsetB' | 'offsetC'>;
export type MatmulLayout = Required<LayoutArgs>;

/**
 * The operands' layout with its defaults filled in (batch 1, no transposes, contiguous
 * batches at offset 0), every size, stride and offset checked to be a u32 count;
 * `op` names the launcher in the error.
 */
export function matmulLayout(op: string, args: LayoutArgs): MatmulLayout {
  const { m, n, k } = args;
  const layout: MatmulLayout = {
    m, n, k,
    batch: args.batch ?? 1,
    transA: args.transA ?? false,
    transB: args.transB ?? false,
    strideA: args.strideA ?? m * k,
    strideB: args.strideB ?? k * n,
    strideC: args.strideC ?? m * n,
    offsetA: args.offsetA ?? 0,
    offsetB: args.offsetB ?? 0,
    offsetC: args.offsetC ?? 0,
  };
  for (const name of ['m', 'n', 'k', 'batch', 'strideA', 'strideB', 'strideC', 'offsetA', 'offsetB', 'offsetC'] as const) {
    if (!isCount(layout[name])) throw new GpuError(`${op}: ${name} = ${layout[name]} is not a count`);
  }
  return layout;
}

/**
 * Records C[b] = act(op(A[b]) @ op(B[b]) + bias) (or C[b] += ...) for b < batch.
 * Returns how it cut k (MatmulCut).
 */
export function matmul(rt: Runtime, args: MatmulArgs): MatmulCut {
  const { a, b, out, bias, residual } = args;
  const { m, n, k, batch, transA, transB, strideA, strideB, strideC, offsetA, offsetB, offsetC } = matmulLayout('matmul', args);
  const act = args.act ?? 'none';
  const accumulate = args.accumulate ?? false;
  if (!(act in MATMUL_ACTS)) throw new GpuError(`matmul: unknown activation "${act}"`);
  if (out === a || out === b || out === bias || out === residual) throw new GpuError('matmul: the output buffer is also an input');
  if (residual && accumulate) throw new GpuError('matmul: residual and accumulate both add to the result; pass one');
  if (batch > 1 && strideC < m * n) throw new GpuError(`matmul: batches of the output overlap (strideC ${strideC} < m*n ${m * n})`);
  if (args.splitK !== undefined && !(Number.isInteger(args.splitK) && args.splitK >= 1)) throw new GpuError(`matmul: splitK = ${args.splitK} is not a count of runs`);
  if (args.splitK !== undefined && args.streamK !== undefined) throw new GpuError('matmul: splitK and streamK are two ways to cut k; pass one');
  if (m === 0 || n === 0 || batch === 0) return UNCUT;
  const last = batch - 1;
  checkBuffer('A', a, offsetA + last * strideA + m * k);
  checkBuffer('B', b, offsetB + last * strideB + k * n);
  checkBuffer('C', out, offsetC + last * strideC + m * n);
  if (bias) checkBuffer('bias', bias, n);
  if (residual) checkBuffer('residual', residual, offsetC + m * n);

  const tile = args.tile ?? autoTile(rt, args);
  if ((args.splitK ?? 1) > 1 && !isWorkgroupTile(tile)) throw new GpuError(`matmul: split-K runs on the workgroup tiles, not ${tile}`);
  if (args.streamK && !isWorkgroupTile(tile)) throw new GpuError(`matmul: stream-K runs on the workgroup tiles, not ${tile}`);
  if (tile === SKINNY_TILE) {
    if (!skinnyFits(args)) throw new GpuError(`matmul: the ${SKINNY_TILE} tile needs transB without transA, batch 1, and k, offsetA, offsetB multiples of 4`);
    matmulSkinny(rt, { a, b, bias, residual, out, m, n, k, offsetA, offsetB, offsetC, act, accumulate });
    return UNCUT;
  }
  if (residual) throw new GpuError(`matmul: a residual needs the ${SKINNY_TILE} tile, not ${tile}`);
  const aligned = (row: number, offset: number, stride: number) => vec4Rows(row, offset, stride, batch);
  const vecC = aligned(n, offsetC, strideC);
  if (isPanels(tile)) {
    if (!tileFits(rt, tile)) throw new GpuError(`matmul: tile ${tile} needs a ${PANEL_BYTES}-byte uniform binding, this device offers ${rt.gpu.limits.maxUniformBufferBindingSize}`);
    matmulPanels(rt, tile, { ...args, batch, transA, transB, strideA, strideB, strideC, offsetA, offsetB, offsetC, act, accumulate }, vecC, aligned);
    return UNCUT;
  }
  if (!isWorkgroupTile(tile)) throw new GpuError(`matmul: unknown tile "${tile}"`);
  if (!tileFits(rt, tile)) throw new GpuError(`matmul: tile ${tile} needs ${workgroupBytes(tile)} bytes of workgroup memory, this device offers ${rt.gpu.limits.maxComputeWorkgroupStorageSize}`);
  const cfg = MATMUL_TILES[tile];
  // One batch with its operands bound at their offsets (where the device's alignment
  // allows) lets the kernel compile without base arithmetic (BASED, see the shader).
  const align = rt.gpu.limits.minStorageBufferOffsetAlignment;
  const place = (buffer: GPUBuffer, offset: number): [Binding, number] =>
    batch === 1 && offset > 0 && (offset * 4) % align === 0 ? [{ buffer, offset: offset * 4 }, 0] : [buffer, offset];
  const [bindA, offA] = place(a, offsetA);
  const [bindB, offB] = place(b, offsetB);
  const [bindC, offC] = place(out, offsetC);
  const entry = tiledEntry(layoutName(transA, transB), plainEpilogue(vecC, args), tile);
  const vecA = aligned(transA ? m : k, offsetA, strideA);
  const vecB = aligned(transB ? k : n, offsetB, strideB);
  const shape = tileShape(tile);
  const tilesM = Math.ceil(m / shape.rows);
  const tilesN = Math.ceil(n / shape.cols);
  const splittable = batch === 1 && n % 4 === 0 && offA === 0 && offB === 0;
  const chosen = splittable && args.tile === undefined && args.splitK === undefined && !rt.caps.compatibility;
  const stream = args.streamK ?? (chosen && k > 0 ? planStreamK(tilesM * tilesN, Math.ceil(k / cfg.BK), cfg.resident) : undefined);
  const runs = args.splitK ?? (chosen && !stream ? launcherRuns(rt, m, n, k, batch, entry) : 1);
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
    const kernel = rt.kernel('matmul', entry, {
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
function cutProduct(rt: Runtime, r: SplitRunArgs, tile: WorkgroupTile, form: 'SPLIT_K' | 'STREAM'): ReturnType<Runtime['kernel']> {
  return rt.kernel('matmul', 'main', { ...productConstants(tile, r), VEC_C: 1, BASED: 0, [form]: 1 });
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
  const sum = rt.kernel('matmul', 'split_k_sum', epilogueConstants(r));
  const q = uniforms(13);
  q.u.set([m, n, used, 0, 0, 0, 0, 0, 0, 0, 0, r.offC, 0]);
  rt.dispatch(sum, [partials, null, r.bias ?? partials, r.out], q.u, grid1d((m * n) / 4, 256));
  rt.pool.release(partials);
  return used;
}

/**
 * Stream-K (shaders/matmul.wgsl, `main` with STREAM): the first plan.tiles tiles' K
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
  const sum = rt.kernel('matmul', 'stream_k_sum', { ...epilogueConstants(r), ...tileConstants(tile) });
  rt.dispatch(sum, [partials, null, r.bias ?? partials, r.out], p.u, grid1d((plan.tiles * rows * cols) / 4, 256));
  rt.pool.release(partials);
}

type SkinnyArgs = Required<Pick<MatmulArgs, 'a' | 'b' | 'out' | 'm' | 'n' | 'k' | 'offsetA' | 'offsetB' | 'offsetC' | 'act' | 'accumulate'>> & Pick<MatmulArgs, 'bias' | 'residual'>;

/**
 * Rows of A per skinny workgroup (SKINNY_ROWS in the shader, at most SKINNY_MAX_ROWS):
 * B is read once per this many. 16 rows read the weights half as often, but on the
 * H200 batch-32 decoding fell from 2,776 to 1,931 tokens/s with them (twice the
 * accumulators and workgroup memory per lane; skinny_swiglu took 114 us a call), so 8.
 */
const skinnyRows = (m: number) => (m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8);

function matmulSkinny(rt: Runtime, r: SkinnyArgs): void {
  const rows = skinnyRows(r.m);
  const kernel = rt.kernel('matmul', 'skinny', {
    SKINNY_ROWS: rows, BIAS: Number(!!r.bias), ACT: MATMUL_ACTS[r.act], ACCUM: Number(r.accumulate), RESID: Number(!!r.residual),
  });
  // 8 columns per workgroup (SKINNY_COLS).
  const [gx, gy] = grid1d(r.n, 8);
  const p = uniforms(13);
  p.u.set([r.m, r.n, r.k, 0, 0, 0, 0, 0, gx, r.offsetA, r.offsetB, r.offsetC, 0]);
  // Without a bias or residual the bindings still need a buffer; A is read-only already.
  rt.dispatch(kernel, [r.a, r.b, r.bias ?? r.a, r.out, r.residual ?? r.a], p.u, [Math.ceil(r.m / rows), gx, gy]);
}

/** The skinny variants' uniform (SkinnyParams) and grid for an m x n output. */
function skinnyLaunch(m: number, n: number, k: number, n0 = 0, n1 = 0, eps = 0): { params: Uint32Array; grid: [number, number, number] } {
  const [gx, gy] = grid1d(n, 8);
  const p = uniforms(7);
  p.u.set([m, n, k, gx, n0, n1]);
  p.f[6] = eps;
  return { params: p.u, grid: [Math.ceil(m / skinnyRows(m)), gx, gy] };
}

/** A folded RMSNorm (skinny_concat_norm, skinny_swiglu's NORM_A) and its epsilon. */
export interface SkinnyNorm {
  /** [k] */
  weight: GPUBuffer;
  eps: number;
}

function checkNormEps(what: string, norm: SkinnyNorm | undefined): void {
  if (norm && !(norm.eps >= 0 && Number.isFinite(norm.eps))) throw new GpuError(`${what}: eps = ${norm.eps} must be a finite number >= 0`);
}

function checkSkinny(what: string, m: number, k: number): void {
  for (const [name, v] of Object.entries({ m, k })) {
    if (!isCount(v)) throw new GpuError(`${what}: ${name} = ${v} is not a count`);
  }
  if (k % 4 !== 0) throw new GpuError(`${what}: k = ${k} must be a multiple of 4 (the skinny kernels read vec4s)`);
}

export interface SkinnyConcatArgs {
  /** [m, k] */
  a: GPUBuffer;
  /** One to three weights, each [n_i, k]. */
  weights: readonly GPUBuffer[];
  /** The weights' row counts n_i. */
  ns: readonly number[];
  /** Per weight, [n_i] or none; all or none of the weights have one. */
  biases?: readonly GPUBuffer[];
  /** [m, sum n_i]: row r is a_r W_0^T + b_0, then a_r W_1^T + b_1, ... */
  out: GPUBuffer;
  m: number;
  k: number;
  /**
   * RMSNorm A's rows with this weight [k] first (`skinny_concat_norm`), on devices
   * with the ninth storage binding it takes (skinnyConcatTakesNorm).
   */
  norm?: SkinnyNorm;
}

/** Storage buffers per shader stage that `skinny_concat_norm` binds. */
const CONCAT_NORM_BINDINGS = 9;

/** Whether this device can run skinny_concat with the RMSNorm folded in (nine storage bindings). */
export function skinnyConcatTakesNorm(rt: Runtime): boolean {
  return rt.gpu.limits.maxStorageBuffersPerShaderStage >= CONCAT_NORM_BINDINGS;
}

/**
 * Several projections of the same rows in one dispatch (the skinny kernel's
 * `skinny_concat`): out = A [W_0; W_1; W_2]^T + [b_0; b_1; b_2]. A, the weights and out
 * start at offset 0.
 */
export function matmulSkinnyConcat(rt: Runtime, args: SkinnyConcatArgs): void {
  const { a, weights, ns, biases, out, m, k, norm } = args;
  const what = 'matmul (skinny concat)';
  checkSkinny(what, m, k);
  if (weights.length < 1 || weights.length > 3 || ns.length !== weights.length) {
    throw new GpuError(`${what}: 1 to 3 weights with a row count each, got ${weights.length} weights and ${ns.length} counts`);
  }
  if (biases && biases.length !== weights.length) throw new GpuError(`${what}: ${biases.length} biases for ${weights.length} weights`);
  const n = ns.reduce((s, x) => s + x, 0);
  if (ns.some((x) => !isCount(x)) || !isCount(n)) throw new GpuError(`${what}: row counts [${ns.join(', ')}] are not counts`);
  if (out === a || weights.includes(out) || biases?.includes(out) || out === norm?.weight) throw new GpuError(`${what}: the output buffer is also an input`);
  checkNormEps(what, norm);
  if (norm && !skinnyConcatTakesNorm(rt)) {
    throw new GpuError(`${what}: the folded RMSNorm needs ${CONCAT_NORM_BINDINGS} storage buffers per shader stage, this device offers ${rt.gpu.limits.maxStorageBuffersPerShaderStage}`);
  }
  if (m === 0 || n === 0) return;
  checkBuffer('A', a, m * k);
  weights.forEach((w, i) => checkBuffer(`weight ${i}`, w, ns[i] * k));
  biases?.forEach((bb, i) => checkBuffer(`bias ${i}`, bb, ns[i]));
  checkBuffer('C', out, m * n);
  if (norm) checkBuffer('norm weight', norm.weight, k);
  const { params, grid } = skinnyLaunch(m, n, k, ns[0], ns[1] ?? 0, norm?.eps);
  const kernel = rt.kernel('matmul', norm ? 'skinny_concat_norm' : 'skinny_concat', { SKINNY_ROWS: skinnyRows(m), BIAS: Number(!!biases) });
  // Missing weights and biases take a buffer that is bound but never read.
  const w = (i: number) => weights[i] ?? weights[0];
  const bias = (i: number) => biases?.[i] ?? biases?.[0] ?? a;
  const buffers = [a, w(0), w(1), w(2), bias(0), bias(1), bias(2), out];
  rt.dispatch(kernel, norm ? [...buffers, norm.weight] : buffers, params, grid);
}

export interface SkinnySwigluArgs {
  /** [m, k] */
  a: GPUBuffer;
  /** [n, k] each */
  gate: GPUBuffer;
  up: GPUBuffer;
  /** [m, n] = silu(A gate^T) * (A up^T) */
  out: GPUBuffer;
  m: number;
  n: number;
  k: number;
  /** RMSNorm A's rows with this weight first (A becomes rmsNorm(A, weight, eps)). */
  norm?: SkinnyNorm;
}

/** A gated MLP's gate and up projections and SwiGLU in one dispatch (`skinny_swiglu`); all at offset 0. */
export function matmulSkinnySwiglu(rt: Runtime, args: SkinnySwigluArgs): void {
  const { a, gate, up, out, m, n, k, norm } = args;
  const what = 'matmul (skinny swiglu)';
  checkSkinny(what, m, k);
  if (!isCount(n)) throw new GpuError(`${what}: n = ${n} is not a count`);
  if (out === a || out === gate || out === up || out === norm?.weight) throw new GpuError(`${what}: the output buffer is also an input`);
  checkNormEps(what, norm);
  if (m === 0 || n === 0) return;
  checkBuffer('A', a, m * k);
  checkBuffer('gate', gate, n * k);
  checkBuffer('up', up, n * k);
  checkBuffer('C', out, m * n);
  if (norm) checkBuffer('norm weight', norm.weight, k);
  const { params, grid } = skinnyLaunch(m, n, k, 0, 0, norm?.eps);
  const kernel = rt.kernel('matmul', 'skinny_swiglu', { SKINNY_ROWS: skinnyRows(m), SKINNY_PLANES: 2, NORM_A: Number(!!norm) });
  // Without a norm its binding still needs a buffer; A is read-only already.
  rt.dispatch(kernel, [a, gate, up, out, norm?.weight ?? a], params, grid);
}

type Resolved = Required<Omit<MatmulArgs, 'bias' | 'residual' | 'tile' | 'splitK' | 'streamK'>> & Pick<MatmulArgs, 'bias'>;

interface PanelScratch {
  a: GPUBuffer | null;
  b: GPUBuffer | null;
}

// Packed operands, kept per runtime and grown as needed: a uniform binding needs a
// buffer with UNIFORM usage, which the pool's buffers do not have.
const scratch = new WeakMap<Runtime, PanelScratch>();

function scratchBuffer(rt: Runtime, which: 'a' | 'b', bytes: number): GPUBuffer {
  let s = scratch.get(rt);
  if (!s) scratch.set(rt, (s = { a: null, b: null }));
  const old = s[which];
  if (old && old.size >= bytes) return old;
  if (old) {
    // Recorded dispatches may still read the old buffer: submit them before it goes.
    rt.flush();
    old.destroy();
  }
  const size = Math.max(bytes, 2 * (old?.size ?? 0));
  return (s[which] = rt.device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.UNIFORM, label: `matmul panels ${which}` }));
}

/**
 * Packs one operand of one batch into panels: `rows` of `k` elements, stored [rows, k]
 * (k contiguous) or, when `kMajor`, [k, rows].
 */
function pack(
  rt: Runtime, src: GPUBuffer, dst: GPUBuffer, base: number, rows: number, k: number, kMajor: boolean, vec: boolean,
  geo: { kc: number; rows: number },
): void {
  const kChunks = Math.ceil(k / geo.kc);
  const total = rows * kChunks * geo.kc / 4;
  const p = uniforms(7);
  p.u.set([rows, k, base, kChunks, total, geo.rows, geo.kc / 4]);
  const kernel = rt.kernel('matmul', 'pack', { TRANS_A: Number(kMajor), VEC_A: Number(vec && !kMajor) });
  // Only the part in use: the scratch may have grown past the storage binding limit.
  const used = Math.ceil(rows / geo.rows) * kChunks * PANEL_BYTES;
  rt.dispatch(kernel, [src, { buffer: dst, size: used }], p.u, grid1d(total, 64));
}

// Flags of the `panels` epilogue (P_* in the shader).
const P_FIRST = 1;
const P_LAST = 2;
const P_BIAS = 4;
const P_ACCUM = 8;
const P_ACT_SHIFT = 4;
const P_SECOND = 64;

/** The software GPU's matmul: see the end of shaders/matmul.wgsl. */
function matmulPanels(
  rt: Runtime, tile: PanelTile, r: Resolved, vecC: boolean,
  aligned: (row: number, offset: number, stride: number) => boolean,
): void {
  const { m, n, k } = r;
  const geo = panelShape(tile, k);
  const kChunks = Math.ceil(k / geo.kc);
  // Partial sums go through C, which an accumulating activation needs unchanged.
  if (r.accumulate && r.act !== 'none' && kChunks > 2) {
    throw new GpuError(`matmul: tile ${tile} cannot split k = ${k} over ${Math.ceil(kChunks / 2)} dispatches under an accumulated activation`);
  }
  const mPanels = Math.ceil(m / geo.rows);
  const nPanels = Math.ceil(n / geo.rows);
  const bytes = Math.max(packedBytes(m, k, tile), packedBytes(n, k, tile));
  if (bytes > rt.gpu.limits.maxStorageBufferBindingSize) {
    throw new GpuError(`matmul: tile ${tile} would pack ${bytes} bytes, over the ${rt.gpu.limits.maxStorageBufferBindingSize}-byte storage binding limit`);
  }
  const pa = scratchBuffer(rt, 'a', packedBytes(m, k, tile));
  const pb = scratchBuffer(rt, 'b', packedBytes(n, k, tile));
  const vecA = aligned(r.transA ? m : k, r.offsetA, r.strideA);
  const vecB = aligned(r.transB ? k : n, r.offsetB, r.strideB);
  const kernel = rt.kernel('matmul', vecC ? 'panels_vec4' : 'panels');
  const epilogue = (r.bias ? P_BIAS : 0) | (r.accumulate ? P_ACCUM : 0) | (MATMUL_ACTS[r.act] << P_ACT_SHIFT);
  const window = (buffer: GPUBuffer, panel: number, chunk: number) => ({ buffer, offset: (panel * kChunks + chunk) * PANEL_BYTES, size: PANEL_BYTES });
  for (let bi = 0; bi < r.batch; bi++) {
    // A packs as rows m of k (stored transposed when transA); B as rows n of k, which
    // is its storage order when transB.
    if (bi === 0 || r.strideA !== 0) pack(rt, r.a, pa, r.offsetA + bi * r.strideA, m, k, r.transA, vecA, geo);
    if (bi === 0 || r.strideB !== 0) pack(rt, r.b, pb, r.offsetB + bi * r.strideB, n, k, !r.transB, vecB, geo);
    for (let mp = 0; mp < mPanels; mp++) {
      for (let np = 0; np < nPanels; np++) {
        const lanes = Math.ceil(Math.min(geo.rows, m - mp * geo.rows) / 8) * Math.ceil(Math.min(geo.rows, n - np * geo.rows) / 16);
        // Two K chunks a dispatch (P_SECOND), halving dispatches and partial-sum passes.
        for (let kc = 0; kc < kChunks; kc += 2) {
          const next = Math.min(kc + 1, kChunks - 1);
          const flags = epilogue | (kc === 0 ? P_FIRST : 0) | (kc + 2 >= kChunks ? P_LAST : 0) | (next > kc ? P_SECOND : 0);
          const p = uniforms(8);
          p.u.set([m, n, mp * geo.rows, np * geo.rows, r.offsetC + bi * r.strideC, flags, geo.rows, geo.kc / 4]);
          rt.dispatch(kernel, [window(pa, mp, kc), window(pb, np, kc), r.bias ?? r.a, r.out, window(pa, mp, next), window(pb, np, next)], p.u,
            [Math.ceil(lanes / PANEL_WG)]);
        }
      }
    }
  }
}
