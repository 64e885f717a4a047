// Differentiable reductions: sum, mean, max over axes.

import * as ck from '../../kernels/copy.ts';
import * as ew from '../../kernels/elementwise.ts';
import { record } from '../autograd.ts';
import { axisOf, numel } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';
import { mul } from './elementwise.ts';
import { reduceAxes } from './reduce_axes.ts';

function keptShape(shape: readonly number[], axes: number[]): number[] {
  return shape.map((d, i) => (axes.includes(i) ? 1 : d));
}

function normAxes(x: Tensor, axis?: number | number[]): number[] {
  if (axis === undefined) return x.shape.map((_, i) => i);
  return (Array.isArray(axis) ? axis : [axis]).map((a) => axisOf('reduce', a, x.rank));
}

/** Broadcasts g (with reduced dims as 1) back to `shape`, times `factor`. */
function expandGrad(g: Tensor, keptShapeOf: number[], shape: readonly number[], factor: number): Tensor {
  const rt = g.storage.rt;
  const out = empty(shape, 'f32', rt);
  ck.gather(rt, g.buffer, out.buffer, shape, broadcastStrides(keptShapeOf, shape));
  if (factor === 1) return out;
  const scaled = empty(shape, 'f32', rt);
  ew.unary(rt, 'affine', out.buffer, scaled.buffer, out.size, factor, 0);
  out.dispose();
  return scaled;
}

function broadcastStrides(from: readonly number[], to: readonly number[]): number[] {
  const s: number[] = new Array(from.length);
  let acc = 1;
  for (let i = from.length - 1; i >= 0; i--) {
    s[i] = from[i] === 1 && to[i] !== 1 ? 0 : acc;
    acc *= from[i];
  }
  return s;
}

export function sum(x: Tensor, axis?: number | number[], keepDims = false): Tensor {
  const axes = normAxes(x, axis);
  const r = reduceAxes(x, axes, 'sum');
  const kept = keptShape(x.shape, axes);
  const out = keepDims ? r.view(kept) : r;
  if (keepDims) r.dispose();
  return record(out, 'sum', [x], (g) => [expandGrad(g, kept, x.shape, 1)]);
}

export function mean(x: Tensor, axis?: number | number[], keepDims = false): Tensor {
  const axes = normAxes(x, axis);
  const count = numel(axes.map((a) => x.shape[a]));
  const r = reduceAxes(x, axes, 'mean');
  const kept = keptShape(x.shape, axes);
  const out = keepDims ? r.view(kept) : r;
  if (keepDims) r.dispose();
  return record(out, 'mean', [x], (g) => [expandGrad(g, kept, x.shape, 1 / count)]);
}

/** Max over axes; the gradient flows to every position equal to the max. */
export function max(x: Tensor, axis?: number | number[], keepDims = false): Tensor {
  const axes = normAxes(x, axis);
  const r = reduceAxes(x, axes, 'max');
  const kept = keptShape(x.shape, axes);
  const out = keepDims ? r.view(kept) : r;
  if (keepDims) r.dispose();
  return record(out, 'max', [x], (g) => {
    const rt = x.storage.rt;
    const mk = out.view(kept);
    const mask = empty(x.shape, 'f32', rt);
    ew.binaryBroadcast(rt, 'eq', x.buffer, mk.buffer, mask.buffer, x.shape, broadcastStrides(x.shape, x.shape), broadcastStrides(kept, x.shape));
    mk.dispose();
    const ge = expandGrad(g, kept, x.shape, 1);
    const gx = mul(ge, mask);
    ge.dispose();
    mask.dispose();
    return [gx];
  });
}
