// The f32 matmul's tiles: the workgroup tiles of the tiled kernel (tiled.ts), the
// software GPU's uniform panels (panels.ts) and the skinny path (skinny.ts), and what
// each needs of the device.

import type { Runtime } from '../../gpu/runtime.ts';

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
 * The software GPU's path (shaders/matmul/panels.wgsl): both operands packed into
 * 64 KiB uniform-buffer panels of PANEL_KC consecutive k (fewer when K is smaller, or
 * where a launch asks for fewer: MatmulArgs.panelK).
 */
export const PANEL_TILE = 'panels/k128';
/** Most k per panel. */
export const PANEL_KC = 128;

/**
 * The skinny path (shaders/matmul/skinny.wgsl): a few rows of A by a B stored
 * [N, K], a decode step's products, streaming B at full width instead of through one
 * row of output tiles. It needs transB without transA, batch 1, and K and the A/B
 * offsets multiples of 4.
 */
export const SKINNY_TILE = 'skinny';

export type WorkgroupTile = keyof typeof MATMUL_TILES;
export type PanelTile = typeof PANEL_TILE;
export type MatmulTile = WorkgroupTile | PanelTile | typeof SKINNY_TILE;

export const isPanels = (tile: MatmulTile): tile is PanelTile => tile === PANEL_TILE;
export const isWorkgroupTile = (tile: MatmulTile): tile is WorkgroupTile => tile in MATMUL_TILES;

/**
 * Whether every tile of an m x n output and every slice of k lie inside the operands,
 * so the kernel compiles without the loads' bounds checks (the shader's WHOLE; runs of
 * k are whole slices already). H200, 2026-12-01, as trained, TFLOP/s: the LM head's dW
 * in vocabulary chunks 39.0 -> 47.0, the MLP's dW 36.4 -> 39.1-39.2, the LM head's dX
 * chunks 39.5 -> 43.0, 4096^3 44.6 -> 47.7 (docs/RESULTS.md).
 */
export const wholeTiles = (tile: WorkgroupTile, m: number, n: number, k: number) => {
  const { rows, cols } = tileShape(tile);
  return m % rows === 0 && n % cols === 0 && k % MATMUL_TILES[tile].BK === 0;
};

/** Floats in one uniform-buffer panel (64 KiB, WebGPU's default binding limit). */
export const PANEL_FLOATS = 16384;
export const PANEL_BYTES = PANEL_FLOATS * 4;
/** Invocations per `panels` workgroup (PANEL_WG in the shader), each an 8x16 block of C. */
export const PANEL_WG = 32;

export function workgroupBytes(tile: WorkgroupTile): number {
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

/** Whether `kc` can be the k of a panel: a power of two from 4 to PANEL_KC. */
export const panelDepthFits = (kc: number) => Number.isInteger(kc) && kc >= 4 && kc <= PANEL_KC && (kc & (kc - 1)) === 0;

/** Panel geometry for a K of `k`: k per panel (a power of two, at most `most`) and rows per panel. */
export function panelShape(k: number, most = PANEL_KC): { kc: number; rows: number } {
  const kc = Math.min(most, 2 ** Math.ceil(Math.log2(Math.max(k, 4))));
  return { kc, rows: PANEL_FLOATS / kc };
}

/** Bytes of `rows` rows of k, packed into panels of at most `most` k. */
export function packedBytes(rows: number, k: number, most = PANEL_KC): number {
  const { kc, rows: per } = panelShape(k, most);
  return Math.ceil(rows / per) * Math.ceil(k / kc) * PANEL_BYTES;
}
