// The software GPU's matmul (shaders/matmul/panels.wgsl, `pack` and `panels`): both
// operands packed into 64 KiB uniform-buffer panels, multiplied panel by panel.

import { GpuError } from '../../device/errors.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { grid1d, uniforms } from '../launch.ts';
import { MATMUL_ACTS, vec4Rows, type ResolvedArgs } from './args.ts';
import { PANEL_BYTES, PANEL_KC, PANEL_TILE, PANEL_WG, packedBytes, panelShape } from './tiles.ts';

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
  const kernel = rt.kernel('matmul/panels', 'pack', { TRANS_A: Number(kMajor), VEC_A: Number(vec && !kMajor) });
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

/** The software GPU's matmul, in panels of at most `most` k (panelDepthFits): see shaders/matmul/panels.wgsl. */
export function matmulPanels(rt: Runtime, r: ResolvedArgs, most = PANEL_KC): void {
  const { m, n, k } = r;
  const tile = PANEL_TILE;
  const aligned = (row: number, offset: number, stride: number) => vec4Rows(row, offset, stride, r.batch);
  const vecC = aligned(n, r.offsetC, r.strideC);
  const geo = panelShape(k, most);
  const kChunks = Math.ceil(k / geo.kc);
  // Partial sums go through C, which an accumulating activation needs unchanged.
  if (r.accumulate && r.act !== 'none' && kChunks > 2) {
    throw new GpuError(`matmul: tile ${tile} cannot split k = ${k} over ${Math.ceil(kChunks / 2)} dispatches (panels of ${geo.kc} k) under an accumulated activation`);
  }
  const mPanels = Math.ceil(m / geo.rows);
  const nPanels = Math.ceil(n / geo.rows);
  const bytes = Math.max(packedBytes(m, k, most), packedBytes(n, k, most));
  if (bytes > rt.gpu.limits.maxStorageBufferBindingSize) {
    throw new GpuError(`matmul: tile ${tile} would pack ${bytes} bytes, over the ${rt.gpu.limits.maxStorageBufferBindingSize}-byte storage binding limit`);
  }
  const pa = scratchBuffer(rt, 'a', packedBytes(m, k, most));
  const pb = scratchBuffer(rt, 'b', packedBytes(n, k, most));
  const vecA = aligned(r.transA ? m : k, r.offsetA, r.strideA);
  const vecB = aligned(r.transB ? k : n, r.offsetB, r.strideB);
  const kernel = rt.kernel('matmul/panels', vecC ? 'panels_vec4' : 'panels');
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
