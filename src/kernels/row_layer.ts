// Launcher for shaders/row_layer.wgsl: one Qwen2 decoder layer of a decode step in one
// dispatch, a workgroup per `rows` rows of the batch.

import type { Runtime } from '../gpu/runtime.ts';
import { uniforms } from './launch.ts';
import { invFreqTable } from './rope.ts';

/** Float offsets of a layer's parts in its packed buffer (models/layer_packs.ts), each a multiple of 4. */
export interface RowLayerOffsets {
  inNorm: number;
  wqkv: number;
  /** null: the projections have no biases. */
  bqkv: number | null;
  wo: number;
  postNorm: number;
  wg: number;
  wu: number;
  wd: number;
}

export interface RowLayerDims {
  b: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  capacity: number;
  offset: number;
  eps: number;
  theta: number;
  /** Rows a workgroup takes (1..4). */
  rowsPerGroup: number;
}

/** Workgroup memory the kernel declares for `rowsPerGroup` rows (its arrays, f32). */
export function rowLayerWorkgroupBytes(d: Pick<RowLayerDims, 'hidden' | 'heads' | 'kvHeads' | 'headDim' | 'intermediate' | 'rowsPerGroup'>): number {
  const qkv = (d.heads + 2 * d.kvHeads) * d.headDim;
  return 4 * (d.rowsPerGroup * (2 * d.hidden + qkv + d.heads * d.headDim + d.intermediate) + 3 * 256);
}

/** out = the layer of x [b, hidden]; the step's keys and values go into the caches at `offset`. */
export function rowLayer(rt: Runtime, d: RowLayerDims, at: RowLayerOffsets, x: GPUBuffer, packed: GPUBuffer, keys: GPUBuffer, values: GPUBuffer, positions: GPUBuffer, pad: GPUBuffer, out: GPUBuffer): void {
  const p = uniforms(16);
  p.u.set([d.b, d.heads, d.kvHeads, d.headDim, d.capacity, d.offset]);
  p.setF(6, d.eps);
  p.u.set([at.bqkv === null ? 0 : 1, at.inNorm, at.wqkv, at.bqkv ?? 0, at.wo, at.postNorm, at.wg, at.wu, at.wd], 7);
  const qkv = (d.heads + 2 * d.kvHeads) * d.headDim;
  const kernel = rt.kernel('row_layer', 'main', { ROWS: d.rowsPerGroup, H: d.hidden, QKV: qkv, HQD: d.heads * d.headDim, INTER: d.intermediate });
  rt.dispatch(kernel, [x, packed, keys, values, positions, pad, invFreqTable(rt, d.theta, d.headDim), out], p.u, [Math.ceil(d.b / d.rowsPerGroup), 1]);
}

/** Parameters of a layer above which the whole-layer kernel is not taken: each workgroup streams all of them. */
export const ROW_LAYER_MAX_PARAMS = 4 * 2 ** 20;

/**
 * Rows a workgroup of the whole-layer kernel takes for a batch of `batch` rows. Each
 * workgroup streams the whole layer, so a workgroup per row keeps the most of the GPU
 * busy up to a batch of a few hundred, and more rows a workgroup (at most 4, from 256
 * rows) read the weights fewer times for a wider batch; fewer where workgroup memory
 * is short, 0 where even one row does not fit.
 */
export function rowLayerRowsPerGroup(rt: Runtime, d: Pick<RowLayerDims, 'hidden' | 'heads' | 'kvHeads' | 'headDim' | 'intermediate'>, batch: number): number {
  const limit = rt.gpu.limits.maxComputeWorkgroupStorageSize;
  for (let rows = Math.max(1, Math.min(4, Math.floor(batch / 128))); rows >= 1; rows--) {
    if (rowLayerWorkgroupBytes({ ...d, rowsPerGroup: rows }) <= limit && Math.ceil(batch / rows) <= rt.gpu.limits.maxComputeWorkgroupsPerDimension) return rows;
  }
  return 0;
}
