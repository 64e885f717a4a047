// Reductions over axes without autograd: what the differentiable reductions (reduce.ts)
// and the gradients of broadcasting ops (elementwise.ts, matmul.ts) are built on.

import * as rk from '../../kernels/reduce.ts';
import { expectDType } from '../dtype.ts';
import { axisOf, numel } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';
import { permute } from './shape_ops.ts';

/** Reduces one axis (no autograd): [outer, r, inner] -> [outer, inner]. */
function reduceAxisRaw(x: Tensor, axis: number, op: rk.ReduceOp): Tensor {
  const outer = numel(x.shape.slice(0, axis));
  const r = x.shape[axis];
  const inner = numel(x.shape.slice(axis + 1));
  const rt = x.storage.rt;
  const shape = x.shape.filter((_, i) => i !== axis);
  const y = empty(shape, 'f32', rt);
  rk.reduce(rt, op, x.buffer, y.buffer, outer, r, inner);
  return y;
}

/**
 * Sum, mean or max over `axes` (dims removed from the result, no autograd). Several
 * axes are moved to the end by one permute and reduced as one row.
 */
export function reduceAxes(x: Tensor, axes: readonly number[], op: rk.ReduceOp): Tensor {
  expectDType(`reduce ${op}`, 'input', x.dtype, 'f32');
  const ax = [...new Set(axes.map((a) => axisOf(op, a, x.rank)))].sort((a, b) => a - b);
  if (ax.length === 0) return x.view(x.shape);
  if (ax.length === 1) return reduceAxisRaw(x, ax[0], op);
  const keepAxes = x.shape.map((_, i) => i).filter((i) => !ax.includes(i));
  const isTrailing = ax.every((a, i) => a === x.rank - ax.length + i);
  const moved = isTrailing ? x.view(x.shape) : permute(x, [...keepAxes, ...ax], false);
  const outShape = keepAxes.map((i) => x.shape[i]);
  const flat = moved.view([numel(outShape), numel(ax.map((i) => x.shape[i]))]);
  moved.dispose();
  const r = reduceAxisRaw(flat, 1, op);
  flat.dispose();
  const out = r.view(outShape);
  r.dispose();
  return out;
}
