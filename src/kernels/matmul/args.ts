// The f32 matmul's arguments and what every path checks and derives from them: the
// operands' layout with its defaults, vec4 alignment, and whether the output is plain.

import { bufferSize } from '../../gpu/buffer_pool.ts';
import { GpuError } from '../../device/errors.ts';
import type { MatmulLayoutName } from '../../gpu/kernel_policy.ts';
import type { MatmulTile } from './tiles.ts';

export const MATMUL_ACTS = { none: 0, silu: 1, gelu: 2, relu: 3 } as const;
export type MatmulAct = keyof typeof MATMUL_ACTS;

export const layoutName = (transA: boolean, transB: boolean): MatmulLayoutName => `${transA ? 't' : 'n'}${transB ? 't' : 'n'}`;

/** Tiles of an output streamed over `shares` workgroups (stream-K); the rest run whole. */
export interface StreamKPlan {
  tiles: number;
  shares: number;
}

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
   * k per panel on the panel tile, a power of two from 4 to its PANEL_KC; by default the
   * most k needs. Tests force small ones to cut K into many chunks.
   */
  panelK?: number;
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

export const UNCUT: MatmulCut = Object.freeze({ runs: 1 });

/** Arguments with every default filled in and checked (matmul), as the tiled and panel launchers take them. */
export type ResolvedArgs = Required<Omit<MatmulArgs, 'bias' | 'residual' | 'tile' | 'panelK' | 'splitK' | 'streamK'>> & Pick<MatmulArgs, 'bias'>;

export type TileArgs = Pick<MatmulArgs, 'm' | 'n' | 'k' | 'batch' | 'transA' | 'transB' | 'offsetA' | 'offsetB' | 'offsetC' | 'strideC' | 'bias' | 'act' | 'accumulate'>;

/**
 * Whether an operand's rows of `row` elements, starting `offset` elements in and
 * `stride` apart between batches, are whole vec4s (VEC_A, VEC_B, VEC_C).
 */
export const vec4Rows = (row: number, offset: number, stride: number, batch: number) => row % 4 === 0 && offset % 4 === 0 && (batch === 1 || stride % 4 === 0);

/** Whether C, stored as vec4s (`vecC`), is overwritten with no bias, activation or accumulation. */
export const plainEpilogue = (vecC: boolean, args: Pick<MatmulArgs, 'bias' | 'act' | 'accumulate'>) => vecC && !args.bias && (args.act ?? 'none') === 'none' && !args.accumulate;

/** Whether `args` has a plain output: the outputs `main_origins` and the 128x256 tile serve. */
export function plainOutput(args: TileArgs): boolean {
  const batch = args.batch ?? 1;
  return plainEpilogue(vec4Rows(args.n, args.offsetC ?? 0, args.strideC ?? args.m * args.n, batch), args);
}

export function checkBuffer(what: string, buf: GPUBuffer, elements: number): void {
  const size = bufferSize(buf);
  if (size % 16 !== 0 || size < 16) {
    throw new GpuError(`matmul: ${what} buffer of ${size} bytes; the kernel binds vec4 arrays and needs a multiple of 16`);
  }
  if (elements * 4 > size) throw new GpuError(`matmul: ${what} needs ${elements * 4} bytes, its buffer has ${size}`);
}

export const isCount = (x: number) => Number.isInteger(x) && x >= 0 && x < 2 ** 32;

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
