// Reshape (a view), permute/transpose, slice and concat (copies), with gradients.

import * as ck from '../../kernels/copy.ts';
import { record } from '../autograd.ts';
import { ShapeError } from '../errors.ts';
import { axisOf, fmt, resolveReshape, stridesOf } from '../shape.ts';
import { empty, zeros, type Tensor } from '../tensor.ts';

export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  const to = resolveReshape('reshape', x.shape, shape);
  const out = x.view(to);
  return record(out, 'reshape', [x], (g) => [g.view(x.shape)]);
}

/** Output dim i is input dim perm[i]. */
export function permute(x: Tensor, perm: readonly number[], grad = true): Tensor {
  if (perm.length !== x.rank || [...perm].sort((a, b) => a - b).some((p, i) => p !== i)) {
    throw new ShapeError(`permute: ${JSON.stringify(perm)} is not a permutation of ${x.rank} dims (shape ${fmt(x.shape)})`);
  }
  const rt = x.storage.rt;
  const inStrides = stridesOf(x.shape);
  const shape = perm.map((p) => x.shape[p]);
  // Moving only axes of size 1 leaves the elements in place (a decode step's
  // [B, 1, H, D] -> [B, H, 1, D]): a view, not a copy.
  const kept = perm.filter((p) => x.shape[p] !== 1);
  if (kept.every((p, i) => i === 0 || kept[i - 1] < p)) return grad ? reshape(x, shape) : x.view(shape);
  const out = empty(shape, x.dtype, rt);
  ck.gather(rt, x.buffer, out.buffer, shape, perm.map((p) => inStrides[p]));
  if (!grad) return out;
  const inverse = perm.map((_, i) => perm.indexOf(i));
  return record(out, 'permute', [x], (g) => [permute(g, inverse, false)]);
}

export function transpose(x: Tensor, a = -2, b = -1): Tensor {
  const i = axisOf('transpose', a, x.rank);
  const j = axisOf('transpose', b, x.rank);
  const perm = x.shape.map((_, k) => k);
  perm[i] = j;
  perm[j] = i;
  return permute(x, perm);
}

/** x[..., start:end, ...] along `axis`. */
export function slice(x: Tensor, axis: number, start: number, end: number): Tensor {
  const ax = axisOf('slice', axis, x.rank);
  if (!(Number.isInteger(start) && Number.isInteger(end) && 0 <= start && start <= end && end <= x.shape[ax])) {
    throw new ShapeError(`slice: [${start}, ${end}) out of range for axis ${axis} of ${fmt(x.shape)}`);
  }
  if (start === 0 && end === x.shape[ax]) return reshape(x, x.shape);
  const rt = x.storage.rt;
  const shape = x.shape.map((d, i) => (i === ax ? end - start : d));
  const strides = stridesOf(x.shape);
  const out = empty(shape, x.dtype, rt);
  ck.gather(rt, x.buffer, out.buffer, shape, strides, start * strides[ax]);
  return record(out, 'slice', [x], (g) => {
    const gx = zeros(x.shape, 'f32', rt);
    ck.scatter(rt, g.buffer, gx.buffer, shape, strides, start * strides[ax]);
    return [gx];
  });
}

export function concat(xs: readonly Tensor[], axis: number): Tensor {
  if (xs.length === 0) throw new ShapeError('concat: no tensors');
  const first = xs[0];
  const ax = axisOf('concat', axis, first.rank);
  for (const t of xs) {
    if (t.rank !== first.rank || t.dtype !== first.dtype || t.shape.some((d, i) => i !== ax && d !== first.shape[i])) {
      throw new ShapeError(`concat: ${fmt(t.shape)} ${t.dtype} does not fit ${fmt(first.shape)} ${first.dtype} along axis ${axis}`);
    }
  }
  const rt = first.storage.rt;
  const shape = first.shape.map((d, i) => (i === ax ? xs.reduce((s, t) => s + t.shape[ax], 0) : d));
  const out = empty(shape, first.dtype, rt);
  const strides = stridesOf(shape);
  const offsets: number[] = [];
  let at = 0;
  for (const t of xs) {
    offsets.push(at);
    ck.scatter(rt, t.buffer, out.buffer, t.shape, strides, at * strides[ax]);
    at += t.shape[ax];
  }
  return record(out, 'concat', xs, (g) =>
    xs.map((t, k) => {
      if (!t.requiresGrad) return null;
      const gt = empty(t.shape, 'f32', rt);
      ck.gather(rt, g.buffer, gt.buffer, t.shape, strides, offsets[k] * strides[ax]);
      return gt;
    }),
  );
}

/** In place, no autograd: dst[..., start:start+len, ...] = src along `axis` (KV-cache writes). */
export function assignSlice(dst: Tensor, src: Tensor, axis: number, start: number): void {
  const ax = axisOf('assignSlice', axis, dst.rank);
  const fits = src.rank === dst.rank && src.dtype === dst.dtype && src.shape.every((d, i) => (i === ax ? start + d <= dst.shape[i] : d === dst.shape[i]));
  if (!fits || start < 0) {
    throw new ShapeError(`assignSlice: ${fmt(src.shape)} ${src.dtype} does not fit ${fmt(dst.shape)} ${dst.dtype} at ${start} along axis ${axis}`);
  }
  const strides = stridesOf(dst.shape);
  ck.scatter(dst.storage.rt, src.buffer, dst.buffer, src.shape, strides, start * strides[ax]);
}
