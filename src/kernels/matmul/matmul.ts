// The f32 matmul, batched C = act(op(A) @ op(B) + bias) (+= C): checks its arguments,
// picks the tile (select.ts, or autotune.ts under policy.matmul.tiles `autotune`)
// unless the caller forces one, and records the product on the skinny, panel or tiled
// kernels (shaders/matmul/).

import { GpuError } from '../../device/errors.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { checkBuffer, MATMUL_ACTS, matmulLayout, UNCUT, type MatmulArgs, type MatmulCut, type MatmulLayout } from './args.ts';
import { tunedTile } from './autotune.ts';
import { matmulPanels } from './panels.ts';
import { autoTile } from './select.ts';
import { matmulSkinny, skinnyFits } from './skinny.ts';
import { matmulTiled } from './tiled.ts';
import { isPanels, isWorkgroupTile, PANEL_BYTES, PANEL_KC, panelDepthFits, SKINNY_TILE, tileFits, workgroupBytes, type MatmulTile } from './tiles.ts';

/**
 * Records C[b] = act(op(A[b]) @ op(B[b]) + bias) (or C[b] += ...) for b < batch.
 * Returns how it cut k (MatmulCut).
 */
export function matmul(rt: Runtime, args: MatmulArgs): MatmulCut {
  const { a, b, out, bias, residual } = args;
  const layout = matmulLayout('matmul', args);
  const { m, n, k, batch, strideA, strideB, strideC, offsetA, offsetB, offsetC } = layout;
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
  if (args.tile !== undefined) return record(rt, args, layout, args.tile, false);
  const rules = autoTile(rt, args);
  const forced = args.splitK !== undefined || args.streamK !== undefined || args.panelK !== undefined;
  const tile = rt.policy.matmul.tiles === 'autotune' && !forced
    ? tunedTile(rt, args, rules, (scratch, t) => record(rt, scratch, matmulLayout('matmul', scratch), t, true))
    : rules;
  return record(rt, args, layout, tile, args.splitK === undefined);
}

/**
 * Records `args` (checked by matmul, `layout` its layout) on `tile`. `auto`: the tile
 * was the launcher's choice and no runs were asked for, so the launcher may cut k.
 */
function record(rt: Runtime, args: MatmulArgs, layout: MatmulLayout, tile: MatmulTile, auto: boolean): MatmulCut {
  const { a, b, out, bias, residual } = args;
  const { m, n, k, offsetA, offsetB, offsetC } = layout;
  const act = args.act ?? 'none';
  const accumulate = args.accumulate ?? false;
  if ((args.splitK ?? 1) > 1 && !isWorkgroupTile(tile)) throw new GpuError(`matmul: split-K runs on the workgroup tiles, not ${tile}`);
  if (args.streamK && !isWorkgroupTile(tile)) throw new GpuError(`matmul: stream-K runs on the workgroup tiles, not ${tile}`);
  if (args.panelK !== undefined && !isPanels(tile)) throw new GpuError(`matmul: panelK is for the panel tile, not ${tile}`);
  if (args.panelK !== undefined && !panelDepthFits(args.panelK)) throw new GpuError(`matmul: panelK = ${args.panelK} must be a power of two from 4 to ${PANEL_KC}`);
  if (tile === SKINNY_TILE) {
    if (!skinnyFits(args)) throw new GpuError(`matmul: the ${SKINNY_TILE} tile needs transB without transA, batch 1, and k, offsetA, offsetB multiples of 4`);
    matmulSkinny(rt, { a, b, bias, residual, out, m, n, k, offsetA, offsetB, offsetC, act, accumulate });
    return UNCUT;
  }
  if (residual) throw new GpuError(`matmul: a residual needs the ${SKINNY_TILE} tile, not ${tile}`);
  const resolved = { a, b, out, bias, ...layout, act, accumulate };
  if (isPanels(tile)) {
    if (!tileFits(rt, tile)) throw new GpuError(`matmul: tile ${tile} needs a ${PANEL_BYTES}-byte uniform binding, this device offers ${rt.gpu.limits.maxUniformBufferBindingSize}`);
    matmulPanels(rt, resolved, args.panelK);
    return UNCUT;
  }
  if (!isWorkgroupTile(tile)) throw new GpuError(`matmul: unknown tile "${tile}"`);
  if (!tileFits(rt, tile)) throw new GpuError(`matmul: tile ${tile} needs ${workgroupBytes(tile)} bytes of workgroup memory, this device offers ${rt.gpu.limits.maxComputeWorkgroupStorageSize}`);
  return matmulTiled(rt, resolved, tile, { splitK: args.splitK, streamK: args.streamK, auto });
}
