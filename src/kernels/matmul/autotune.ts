// Tiles measured on this device (policy.matmul.tiles `autotune`; gpu/autotune.ts): the
// first product of each class (sizes, layout, alignment, epilogue) runs on the rules'
// tile (select.ts) and queues a measurement of every tile that fits the device and
// can compute it, each timed on scratch operands of the same layout, the product cut
// along k as the launcher would cut it on that tile; later products of the class run
// on the fastest. The scratch operands are as large as the product's, for as long as
// the measurement lasts.

import type { Runtime } from '../../gpu/runtime.ts';
import { layoutName, matmulLayout, vec4Rows, type MatmulArgs } from './args.ts';
import { skinnyFits } from './skinny.ts';
import { MATMUL_TILES, PANEL_TILE, packedBytes, panelShape, SKINNY_TILE, tileFits, type MatmulTile, type WorkgroupTile } from './tiles.ts';

/** Records `args` on `tile` as the launcher records a tile it chose. */
export type TileRun = (args: MatmulArgs, tile: MatmulTile) => void;

/** Each candidate runs until its runs add up to this long (or MAX_REPS runs)... */
const MIN_MS = 5;
const MAX_REPS = 256;

/** The class of `args` an autotuned tile is kept for. */
export function matmulTuneKey(args: MatmulArgs): string {
  const l = matmulLayout('matmul', args);
  const vec = (row: number, offset: number, stride: number) => Number(vec4Rows(row, offset, stride, l.batch));
  const aligned = `${vec(l.transA ? l.m : l.k, l.offsetA, l.strideA)}${vec(l.transB ? l.k : l.n, l.offsetB, l.strideB)}${vec(l.n, l.offsetC, l.strideC)}`;
  const epilogue = `${args.bias ? 'bias ' : ''}${args.act ?? 'none'}${args.accumulate ? ' accumulate' : ''}${args.residual ? ' residual' : ''}`;
  return `matmul ${l.m}x${l.n}x${l.k} batch ${l.batch} ${layoutName(l.transA, l.transB)} vec4 ${aligned}${skinnyFits(args) ? ' skinny' : ''} ${epilogue}`;
}

/** The tiles that fit this device and compute `args` (the rules' tile among them). */
export function tileCandidates(rt: Runtime, args: MatmulArgs, rules: MatmulTile): MatmulTile[] {
  const tiles = new Set<MatmulTile>([rules]);
  const p = rt.policy.matmul;
  if (skinnyFits(args) && tileFits(rt, SKINNY_TILE) && args.m <= Math.max(p.skinnyMaxRows, p.skinnyMaxRowsNarrow)) tiles.add(SKINNY_TILE);
  // Only the skinny kernel adds a residual.
  if (args.residual) return [...tiles];
  for (const tile of Object.keys(MATMUL_TILES) as WorkgroupTile[]) if (tileFits(rt, tile)) tiles.add(tile);
  const limit = rt.gpu.limits.maxStorageBufferBindingSize;
  // The panels serve the software GPU; they cannot cut k into more than two dispatches
  // under an accumulated activation (panels.ts).
  const chunked = args.accumulate && (args.act ?? 'none') !== 'none' && Math.ceil(args.k / panelShape(args.k).kc) > 2;
  if (rt.caps.compatibility && tileFits(rt, PANEL_TILE) && !chunked && args.k > 0 && packedBytes(args.m, args.k) <= limit && packedBytes(args.n, args.k) <= limit) tiles.add(PANEL_TILE);
  return [...tiles];
}

/**
 * The tile for `args` under autotuning: the measured winner of its class, else `rules`
 * with a measurement of the candidates queued on the runtime (when there are several).
 */
export function tunedTile(rt: Runtime, args: MatmulArgs, rules: MatmulTile, run: TileRun): MatmulTile {
  const key = matmulTuneKey(args);
  const won = rt.autotune.winner(key);
  if (won !== undefined) return won as MatmulTile;
  const tiles = tileCandidates(rt, args, rules);
  if (tiles.length > 1) {
    // The product's buffers may be gone by the time the measurement runs: keep its shape.
    const { a: _a, b: _b, out: _out, bias, residual, ...shape } = args;
    rt.autotune.queue(key, () => fastest(rt, { ...shape, bias: !!bias, residual: !!residual }, tiles, run));
  }
  return rules;
}

type Shape = Omit<MatmulArgs, 'a' | 'b' | 'out' | 'bias' | 'residual'> & { bias: boolean; residual: boolean };

/** Times each of `tiles` on scratch operands laid out as `shape`; returns the fastest. */
async function fastest(rt: Runtime, shape: Shape, tiles: MatmulTile[], run: TileRun): Promise<string> {
  const l = matmulLayout('matmul', shape);
  const last = l.batch - 1;
  const held: GPUBuffer[] = [];
  // Whole vec4s, at least one, as the kernels bind them.
  const scratch = (elements: number) => {
    const buf = rt.pool.acquire(Math.max(16, Math.ceil(elements / 4) * 16), 'matmul autotune scratch');
    held.push(buf);
    return buf;
  };
  try {
    const args: MatmulArgs = {
      ...shape,
      a: scratch(l.offsetA + last * l.strideA + l.m * l.k),
      b: scratch(l.offsetB + last * l.strideB + l.k * l.n),
      out: scratch(l.offsetC + last * l.strideC + l.m * l.n),
      bias: shape.bias ? scratch(l.n) : undefined,
      residual: shape.residual ? scratch(l.offsetC + l.m * l.n) : undefined,
    };
    let best = tiles[0];
    let bestMs = Infinity;
    await rt.sync();
    for (const tile of tiles) {
      // The first run compiles the tile's pipelines.
      run(args, tile);
      await rt.sync();
      let reps = 1;
      let ms = 0;
      for (; ; reps *= 2) {
        const start = performance.now();
        for (let i = 0; i < reps; i++) run(args, tile);
        await rt.sync();
        ms = performance.now() - start;
        if (ms >= MIN_MS || reps >= MAX_REPS) break;
      }
      if (ms / reps < bestMs) {
        best = tile;
        bestMs = ms / reps;
      }
    }
    return best;
  } finally {
    for (const buf of held) rt.pool.release(buf);
  }
}
