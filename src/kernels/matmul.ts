// Launcher for shaders/matmul.wgsl: batched C = act(op(A) @ op(B) + bias) (+= C).

import { GpuError } from '../gpu/errors.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { grid1d, uniforms } from './launch.ts';

export const MATMUL_ACTS = { none: 0, silu: 1, gelu: 2, relu: 3 } as const;
export type MatmulAct = keyof typeof MATMUL_ACTS;

/**
 * Workgroup tile configurations: threads along N and M (each owning an 8x8 block of
 * C, so the tile is 8*WG_Y x 8*WG_X) and the K slice per stage. Workgroup memory is
 * 2 operands x 2 stages x BK x 32 vec4s (32 KiB for BK 16, which the software
 * GPU's limit just admits).
 */
export const MATMUL_TILES = {
  '128x128/k16': { WG_X: 16, WG_Y: 16, BK: 16 },
  // Half the staged registers of k16, twice the barriers.
  '128x128/k8': { WG_X: 16, WG_Y: 16, BK: 8 },
  '64x64/k8': { WG_X: 8, WG_Y: 8, BK: 8 },
} as const;
export type MatmulTile = keyof typeof MATMUL_TILES;

// Measured on the H200 (bench, 2026-11-30): 128x128/k8 beat k16 on every shape
// (30.9 vs 19.9 TFLOP/s at 4096^3) and the 64-tile at every size from 1024^3 up,
// including 4096x896 outputs of only 224 workgroups; the 64-tile only wins on grids
// smaller than that.
const BIG_TILE: MatmulTile = '128x128/k8';
const SMALL_TILE: MatmulTile = '64x64/k8';
const BIG_TILE_MIN_WORKGROUPS = 64;

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
  /** Force a tile size (benchmarks); by default chosen from the shape and the limits. */
  tile?: MatmulTile;
}

function workgroupBytes(tile: MatmulTile): number {
  return 2 * 2 * MATMUL_TILES[tile].BK * 32 * 16;
}

/** Whether this device has the workgroup memory and invocations for `tile`. */
export function tileFits(rt: Runtime, tile: MatmulTile): boolean {
  const { WG_X, WG_Y } = MATMUL_TILES[tile];
  const l = rt.gpu.limits;
  return workgroupBytes(tile) <= l.maxComputeWorkgroupStorageSize && WG_X * WG_Y <= l.maxComputeInvocationsPerWorkgroup;
}

/** The tile the launcher uses for an m x n output repeated `batch` times. */
export function chooseTile(rt: Runtime, m: number, n: number, batch = 1): MatmulTile {
  if (!tileFits(rt, BIG_TILE)) return SMALL_TILE;
  const edge = 8 * MATMUL_TILES[BIG_TILE].WG_Y;
  const workgroups = Math.ceil(m / edge) * Math.ceil(n / edge) * batch;
  return workgroups >= BIG_TILE_MIN_WORKGROUPS ? BIG_TILE : SMALL_TILE;
}

function checkBuffer(what: string, buf: GPUBuffer, elements: number): void {
  if (buf.size % 16 !== 0 || buf.size < 16) {
    throw new GpuError(`matmul: ${what} buffer of ${buf.size} bytes; the kernel binds vec4 arrays and needs a multiple of 16`);
  }
  if (elements * 4 > buf.size) throw new GpuError(`matmul: ${what} needs ${elements * 4} bytes, its buffer has ${buf.size}`);
}

const isCount = (x: number) => Number.isInteger(x) && x >= 0 && x < 2 ** 32;

/** Records C[b] = act(op(A[b]) @ op(B[b]) + bias) (or C[b] += ...) for b < batch. */
export function matmul(rt: Runtime, args: MatmulArgs): void {
  const { a, b, out, bias, m, n, k } = args;
  const batch = args.batch ?? 1;
  const transA = args.transA ?? false;
  const transB = args.transB ?? false;
  const strideA = args.strideA ?? m * k;
  const strideB = args.strideB ?? k * n;
  const strideC = args.strideC ?? m * n;
  const offsetA = args.offsetA ?? 0;
  const offsetB = args.offsetB ?? 0;
  const offsetC = args.offsetC ?? 0;
  const act = args.act ?? 'none';
  const accumulate = args.accumulate ?? false;
  for (const [name, v] of Object.entries({ m, n, k, batch, strideA, strideB, strideC, offsetA, offsetB, offsetC })) {
    if (!isCount(v)) throw new GpuError(`matmul: ${name} = ${v} is not a count`);
  }
  if (!(act in MATMUL_ACTS)) throw new GpuError(`matmul: unknown activation "${act}"`);
  if (out === a || out === b || out === bias) throw new GpuError('matmul: the output buffer is also an input');
  if (batch > 1 && strideC < m * n) throw new GpuError(`matmul: batches of the output overlap (strideC ${strideC} < m*n ${m * n})`);
  if (m === 0 || n === 0 || batch === 0) return;
  const last = batch - 1;
  checkBuffer('A', a, offsetA + last * strideA + m * k);
  checkBuffer('B', b, offsetB + last * strideB + k * n);
  checkBuffer('C', out, offsetC + last * strideC + m * n);
  if (bias) checkBuffer('bias', bias, n);

  const tile = args.tile ?? chooseTile(rt, m, n, batch);
  if (!tileFits(rt, tile)) throw new GpuError(`matmul: tile ${tile} needs ${workgroupBytes(tile)} bytes of workgroup memory, this device offers ${rt.gpu.limits.maxComputeWorkgroupStorageSize}`);
  const cfg = MATMUL_TILES[tile];
  const aligned = (row: number, offset: number, stride: number) => row % 4 === 0 && offset % 4 === 0 && (batch === 1 || stride % 4 === 0);
  const vecC = aligned(n, offsetC, strideC);
  const kernel = rt.kernel('matmul', vecC ? 'main_vec4' : 'main', {
    TRANS_A: Number(transA),
    TRANS_B: Number(transB),
    VEC_A: Number(aligned(transA ? m : k, offsetA, strideA)),
    VEC_B: Number(aligned(transB ? k : n, offsetB, strideB)),
    BIAS: Number(!!bias),
    ACT: MATMUL_ACTS[act],
    ACCUM: Number(accumulate),
    WG_X: cfg.WG_X,
    WG_Y: cfg.WG_Y,
    BK: cfg.BK,
  });
  const tilesM = Math.ceil(m / (8 * cfg.WG_Y));
  const tilesN = Math.ceil(n / (8 * cfg.WG_X));
  const [gx, gy] = grid1d(tilesM * tilesN, 1);
  const maxZ = rt.gpu.limits.maxComputeWorkgroupsPerDimension;
  // Without a bias the binding still needs a buffer; A is read-only already.
  const buffers = [a, b, bias ?? a, out];
  for (let base = 0; base < batch; base += maxZ) {
    const p = uniforms(12);
    p.u.set([m, n, k, base, strideA, strideB, strideC, tilesM, tilesN, offsetA, offsetB, offsetC]);
    rt.dispatch(kernel, buffers, p.u, [gx, gy, Math.min(maxZ, batch - base)]);
  }
}
