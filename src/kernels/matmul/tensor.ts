// Launcher for shaders/matmul/tensor.wgsl: batched C = op(A) @ op(B) + bias (+= C) on
// tensor cores, f32 operands rounded to f16, f32 accumulation.

import { bufferSize } from '../../gpu/buffer_pool.ts';
import { GpuError } from '../../device/errors.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { grid1d, uniforms } from '../launch.ts';
import { matmulLayout, type MatmulArgs } from './args.ts';
import { splitKSum } from './tiled.ts';

/**
 * Tile configurations: SG_M x SG_N subgroups of 32 per workgroup, each owning FM x FN
 * 16x16 accumulators, and the K slice per stage. Named BMxBN (the workgroup's tile of
 * C) / wWMxWN (a subgroup's block) / kBK. See chooseTensorTile for how they measured.
 */
export const TENSOR_TILES = {
  '128x128/w64x32/k32': { SG_M: 2, SG_N: 4, FM: 4, FN: 2, BK: 32 },
  '128x128/w64x32/k16': { SG_M: 2, SG_N: 4, FM: 4, FN: 2, BK: 16 },
  // Four subgroups with 16 accumulators each: fewer fragment loads per MMA, more registers.
  '128x128/w64x64/k16': { SG_M: 2, SG_N: 2, FM: 4, FN: 4, BK: 16 },
  '128x256/w64x64/k16': { SG_M: 2, SG_N: 4, FM: 4, FN: 4, BK: 16 },
  '128x64/w32x32/k32': { SG_M: 4, SG_N: 2, FM: 2, FN: 2, BK: 32 },
  '64x128/w32x32/k32': { SG_M: 2, SG_N: 4, FM: 2, FN: 2, BK: 32 },
  '64x64/w32x32/k32': { SG_M: 2, SG_N: 2, FM: 2, FN: 2, BK: 32 },
} as const;

export type TensorTile = keyof typeof TENSOR_TILES;

// Measured on the H200 (docs/RESULTS.md; kernel TFLOP/s from timestamps). Without
// Dawn's bounds clamps (the default on hardware, src/device/device.ts) 128x128/w64x32/k32
// led or tied on every shape: 110 at 4096^3 (128x256/w64x64/k16: 100), 91-109 on the
// Qwen2.5-0.5B products with A untransposed (78-94), 108 on the lm head's dX with
// K = 151,936 (49), 78-122 on the weight gradients with A transposed (50-99). The
// 64x64 tile trailed everywhere (measured with the clamps) and stays for grids too
// small for the others.
const BIG_TILE: TensorTile = '128x128/w64x32/k32';
const SMALL_TILE: TensorTile = '64x64/w32x32/k32';
const BIG_TILE_MIN_WORKGROUPS = 64;

/** The subgroup size the shader's workgroup arithmetic assumes (SUBGROUP there). */
const SUBGROUP = 32;
/** Halves of padding per stored tile row (PAD in the shader). */
const PAD = 8;
/** Most vec4 loads per invocation per K slice the shader unrolls (Staged). */
const MAX_LOADS = 8;
/** Bytes of one 16x16 f32 subgroup matrix: Dawn's minimum binding size for C under `main`. */
const DIRECT_C_MIN_BYTES = 16 * 16 * 4;

export interface TensorTileGeometry {
  threads: number;
  bm: number;
  bn: number;
  /** Workgroup memory for these transposes: two f16 stages of each operand plus the f32 scratch. */
  workgroupBytes: number;
}

/** Sizes the shader derives from a tile's override constants, checked for what it assumes. */
export function tensorTileGeometry(tile: TensorTile, transA = false, transB = false): TensorTileGeometry {
  const cfg = TENSOR_TILES[tile];
  if (!cfg) throw new GpuError(`matmulTensor: unknown tile "${tile}" (known: ${Object.keys(TENSOR_TILES).join(', ')})`);
  const { SG_M, SG_N, FM, FN, BK } = cfg;
  const subgroups = SG_M * SG_N;
  const threads = SUBGROUP * subgroups;
  const bm = 16 * FM * SG_M;
  const bn = 16 * FN * SG_N;
  const [aRows, aCols] = transA ? [BK, bm] : [bm, BK];
  const [bRows, bCols] = transB ? [bn, BK] : [BK, bn];
  const loadsA = (aRows * aCols) / 4 / threads;
  const loadsB = (bRows * bCols) / 4 / threads;
  const ok = FM >= 1 && FM <= 4 && FN >= 1 && FN <= 4 && BK % 16 === 0 && BK > 0 &&
    [loadsA, loadsB].every((l) => Number.isInteger(l) && l >= 1 && l <= MAX_LOADS);
  if (!ok) throw new GpuError(`matmulTensor: tile ${tile} breaks the shader's assumptions (FM, FN 1-4, BK a multiple of 16, 1-${MAX_LOADS} vec4 loads per invocation per slice)`);
  const halves = 2 * (aRows * (aCols + PAD) + bRows * (bCols + PAD));
  return { threads, bm, bn, workgroupBytes: 2 * halves + 4 * 256 * subgroups };
}

/** Why this device cannot run the tensor-core matmul, or null when it can. */
export const tensorMatmulMissing = (rt: Runtime): string | null => tensorCoresMissing(rt, 'the tensor-core matmul');

/**
 * Why this device cannot run `kernel` (a kernel on f16 subgroup matrices, as this
 * one), or null when it can: what every such kernel needs of the adapter.
 */
export function tensorCoresMissing(rt: Runtime, kernel: string): string | null {
  const c = rt.caps;
  const missing: string[] = [];
  if (!c.f16) missing.push('shader-f16');
  if (!c.subgroups) missing.push('subgroups');
  if (!c.subgroupMatrix) missing.push('chromium-experimental-subgroup-matrix');
  else if (!c.subgroupMatrixF16F32) {
    const offered = c.subgroupMatrixConfigs.map((s) => `${s.M}x${s.N}x${s.K} ${s.componentType}->${s.resultComponentType}`).join(', ') || 'none';
    missing.push(`a 16x16x16 f16->f32 subgroup matrix configuration (offered: ${offered})`);
  }
  if (c.subgroups && (c.subgroupMinSize !== SUBGROUP || c.subgroupMaxSize !== SUBGROUP)) {
    missing.push(`subgroups of exactly ${SUBGROUP} invocations (this adapter: ${c.subgroupMinSize}-${c.subgroupMaxSize})`);
  }
  if (!missing.length) return null;
  return `${kernel} needs ${missing.join(', ')}; ${rt.gpu.description} lacks it` +
    ' (on NVIDIA through Dawn, the toggles allow_unsafe_apis,vulkan_enable_f16_on_nvidia unlock f16 and subgroup matrices)';
}

/** Whether matmulTensor can run on this device. */
export function tensorMatmulAvailable(rt: Runtime): boolean {
  return tensorMatmulMissing(rt) === null;
}

/** Whether the device has the workgroup memory and invocations `tile` needs with these transposes. */
export function tensorTileFits(rt: Runtime, tile: TensorTile, transA = false, transB = false): boolean {
  const g = tensorTileGeometry(tile, transA, transB);
  const l = rt.gpu.limits;
  return g.workgroupBytes <= l.maxComputeWorkgroupStorageSize && g.threads <= l.maxComputeInvocationsPerWorkgroup && g.threads <= l.maxComputeWorkgroupSizeX;
}

/** The tile matmulTensor uses for an m x n output repeated `batch` times when none is forced. */
export function chooseTensorTile(rt: Runtime, m: number, n: number, batch = 1, transA = false, transB = false): TensorTile {
  const enough = (tile: TensorTile) => {
    const g = tensorTileGeometry(tile, transA, transB);
    return Math.ceil(m / g.bm) * Math.ceil(n / g.bn) * batch >= BIG_TILE_MIN_WORKGROUPS && tensorTileFits(rt, tile, transA, transB);
  };
  return enough(BIG_TILE) ? BIG_TILE : SMALL_TILE;
}

/**
 * Runs of k for a decode product of `rows` x n over k on tensor cores: enough that its
 * output tiles times the runs reach policy.decode.splitWorkgroups, each run at least
 * splitMinK long; 1 where the tiles alone reach it (or n is not a multiple of 4).
 */
export function decodeRuns(rt: Runtime, rows: number, n: number, k: number): number {
  const { splitWorkgroups, splitMinK } = rt.policy.decode;
  if (splitWorkgroups <= 0 || n % 4 !== 0) return 1;
  const g = tensorTileGeometry(chooseTensorTile(rt, rows, n, 1, false, true), false, true);
  const tiles = Math.ceil(rows / g.bm) * Math.ceil(n / g.bn);
  const runs = Math.min(Math.floor(splitWorkgroups / tiles), Math.floor(k / Math.max(splitMinK, 32)));
  return runs >= 2 ? runs : 1;
}

/** matmul()'s arguments without its f32-only epilogues (activation, residual). */
export interface TensorMatmulArgs extends Omit<MatmulArgs, 'act' | 'residual' | 'tile'> {
  /** Force a tile configuration (benchmarks); by default chooseTensorTile's. */
  tile?: TensorTile;
  /**
   * Spread each batch's output tiles over dispatches of at most this many workgroups
   * (diagnosing per-dispatch limits); default one dispatch.
   */
  tilesPerDispatch?: number;
  /**
   * f32 [2] on the GPU: [s, 1 / s], s a power of two (kernels/grad_scale.ts). A is
   * multiplied by s before it is rounded to f16 and the product by 1 / s: how a
   * gradient, often far below f16's smallest normal, keeps its precision as A.
   */
  scaleA?: GPUBuffer;
  /**
   * B holds f16 values as u32 pairs (a HalfWeight's packed buffer, tensor/ops/half.ts):
   * offsets, strides and sizes still count elements. Half the bytes of an f32 B.
   */
  halfB?: boolean;
  /**
   * Cut k into this many runs (fewer where whole K slices do not make that many): one
   * dispatch whose workgroup z multiplies run z into pooled partial sums, then
   * split_k_sum adds them into C with the bias and accumulation. For outputs of a few
   * tiles with a long k (a decode step's down projection); one batch, n a multiple of
   * 4, no scaleA.
   */
  runs?: number;
}

function checkBuffer(what: string, buf: GPUBuffer, elements: number, vec4: boolean, elementBytes = 4): void {
  const size = bufferSize(buf);
  if (vec4 && (size % 16 !== 0 || size < 16)) {
    throw new GpuError(`matmulTensor: ${what} buffer of ${size} bytes; the kernel binds it as a vec4 array and needs a multiple of 16`);
  }
  if (elements * elementBytes > size) throw new GpuError(`matmulTensor: ${what} needs ${elements * elementBytes} bytes, its buffer has ${size}`);
}

/**
 * Records C[b] = op(A[b]) @ op(B[b]) + bias (or C[b] += ...) for b < batch, with A and
 * B rounded to f16 and f32 accumulation. Throws, naming what is missing, on a device
 * without f16 subgroup matrices (see tensorMatmulMissing).
 */
export function matmulTensor(rt: Runtime, args: TensorMatmulArgs): void {
  const missing = tensorMatmulMissing(rt);
  if (missing) throw new GpuError(`matmulTensor: ${missing}`);
  const { a, b, out, bias } = args;
  const { m, n, k, batch, transA, transB, strideA, strideB, strideC, offsetA, offsetB, offsetC } = matmulLayout('matmulTensor', args);
  const accumulate = args.accumulate ?? false;
  if (args.tilesPerDispatch !== undefined && !(Number.isInteger(args.tilesPerDispatch) && args.tilesPerDispatch >= 1)) {
    throw new GpuError(`matmulTensor: tilesPerDispatch = ${args.tilesPerDispatch} is not a positive integer`);
  }
  const scaleA = args.scaleA;
  if (out === a || out === b || out === bias || out === scaleA) throw new GpuError('matmulTensor: the output buffer is also an input');
  if (batch > 1 && strideC < m * n) throw new GpuError(`matmulTensor: batches of the output overlap (strideC ${strideC} < m*n ${m * n})`);
  if (m === 0 || n === 0 || batch === 0) return;
  const last = batch - 1;
  checkBuffer('A', a, offsetA + last * strideA + m * k, true);
  checkBuffer('B', b, offsetB + last * strideB + k * n, true, args.halfB ? 2 : 4);
  checkBuffer('C', out, offsetC + last * strideC + m * n, false);
  if (bias) checkBuffer('bias', bias, n, false);
  if (scaleA) checkBuffer('scaleA', scaleA, 2, false);
  // Element offsets and the kernel's index arithmetic are u32.
  for (const [what, end] of [['A', offsetA + last * strideA + m * k], ['B', offsetB + last * strideB + k * n], ['C', offsetC + last * strideC + m * n]] as const) {
    if (end >= 2 ** 32) throw new GpuError(`matmulTensor: ${what} spans ${end} elements, past u32 indexing`);
  }

  const runs = args.runs ?? 1;
  if (!(Number.isInteger(runs) && runs >= 1)) throw new GpuError(`matmulTensor: runs = ${args.runs} is not a positive integer`);
  if (runs > 1 && (batch !== 1 || n % 4 !== 0 || scaleA || args.tilesPerDispatch !== undefined)) {
    throw new GpuError(`matmulTensor: runs of k need one batch, n a multiple of 4 and no scaleA or tilesPerDispatch (batch ${batch}, n ${n})`);
  }
  const tile = args.tile ?? chooseTensorTile(rt, m, n, batch, transA, transB);
  const g = tensorTileGeometry(tile, transA, transB);
  if (!tensorTileFits(rt, tile, transA, transB)) {
    const l = rt.gpu.limits;
    throw new GpuError(`matmulTensor: tile ${tile} needs ${g.workgroupBytes} bytes of workgroup memory and ${g.threads} invocations; this device offers ${l.maxComputeWorkgroupStorageSize} and ${l.maxComputeInvocationsPerWorkgroup}`);
  }
  const cfg = TENSOR_TILES[tile];
  const aligned = (row: number, offset: number, stride: number) => row % 4 === 0 && offset % 4 === 0 && (batch === 1 || stride % 4 === 0);
  // `main` stores whole tiles straight from the accumulators: C's rows and batches must
  // start 16-byte aligned, and Dawn requires a buffer that subgroup matrices touch to
  // hold at least one 16x16 f32 block. Everything else goes through scratch, as does a
  // scaled product (its results are unscaled one by one there).
  // Runs of k: the product of each into partial sums, the epilogue in their sum.
  const kc = runs > 1 ? Math.ceil(Math.ceil(k / runs) / cfg.BK) * cfg.BK : k;
  const used = Math.ceil(k / kc);
  const partials = used > 1 ? rt.pool.acquire(used * m * n * 4, 'tensor-core split-K partial sums') : null;
  const direct = partials ? bufferSize(partials) >= DIRECT_C_MIN_BYTES : !bias && !scaleA && aligned(n, offsetC, strideC) && bufferSize(out) >= DIRECT_C_MIN_BYTES;
  const kernel = rt.kernel('matmul/tensor', direct ? 'main' : 'main_staged', {
    TRANS_A: Number(transA),
    TRANS_B: Number(transB),
    VEC_A: Number(aligned(transA ? m : k, offsetA, strideA)),
    VEC_B: Number(aligned(transB ? k : n, offsetB, strideB)),
    BIAS: Number(!!bias && !partials),
    ACCUM: Number(accumulate && !partials),
    SCALE_A: Number(!!scaleA),
    B_HALF: Number(!!args.halfB),
    SPLIT: Number(!!partials),
    // Every tile and K slice inside the operands: no bounds checks on the loads.
    WHOLE: Number(m % g.bm === 0 && n % g.bn === 0 && k % cfg.BK === 0),
    SG_M: cfg.SG_M,
    SG_N: cfg.SG_N,
    FM: cfg.FM,
    FN: cfg.FN,
    BK: cfg.BK,
  });
  const tilesM = Math.ceil(m / g.bm);
  const tilesN = Math.ceil(n / g.bn);
  const tiles = tilesM * tilesN;
  if (partials) {
    const p = uniforms(15);
    p.u.set([m, n, k, 0, strideA, strideB, m * n, tilesM, tilesN, offsetA, offsetB, 0, kc, 0, tiles]);
    // The bias and scale bindings are never read here; A is read-only already.
    rt.dispatch(kernel, [a, b, a, partials, a], p.u, [...grid1d(tiles, 1), used]);
    splitKSum(rt, partials, used, { out, m, n, offC: offsetC, bias, act: 'none', accumulate, vecC: aligned(n, offsetC, strideC) });
    rt.pool.release(partials);
    return;
  }
  const per = Math.min(args.tilesPerDispatch ?? tiles, tiles);
  const maxZ = rt.gpu.limits.maxComputeWorkgroupsPerDimension;
  // Without a bias or a scale the bindings still need a buffer; A is read-only already.
  const buffers = [a, b, bias ?? a, out, scaleA ?? a];
  for (let base = 0; base < batch; base += maxZ) {
    for (let first = 0; first < tiles; first += per) {
      const end = Math.min(first + per, tiles);
      const p = uniforms(15);
      p.u.set([m, n, k, base, strideA, strideB, strideC, tilesM, tilesN, offsetA, offsetB, offsetC, 0, first, end - first]);
      const [gx, gy] = grid1d(end - first, 1);
      rt.dispatch(kernel, buffers, p.u, [gx, gy, Math.min(maxZ, batch - base)]);
    }
  }
}
