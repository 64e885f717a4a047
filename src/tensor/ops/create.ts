import * as ew from '../../kernels/elementwise.ts';
import { runtime, type Runtime } from '../../gpu/runtime.ts';
import { ShapeError } from '../errors.ts';
import { expectDType, type DType } from '../dtype.ts';
import type { Shape } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

export function full(shape: Shape, value: number, rt: Runtime = runtime()): Tensor {
  const t = empty(shape, 'f32', rt);
  ew.fill(rt, t.buffer, t.size, value);
  return t;
}

export function ones(shape: Shape, rt: Runtime = runtime()): Tensor {
  return full(shape, 1, rt);
}

export function onesLike(t: Tensor): Tensor {
  expectDType('onesLike', 'input', t.dtype, 'f32');
  return full(t.shape, 1, t.storage.rt);
}

/** A contiguous copy (no autograd). */
export function clone(t: Tensor, dtype: DType = t.dtype): Tensor {
  const rt = t.storage.rt;
  const out = empty(t.shape, dtype, rt);
  rt.copy(t.buffer, 0, out.buffer, 0, t.bytes);
  return out;
}

/**
 * Rows `rows` of the first axis, in that order, as a new tensor (no autograd). Runs of
 * consecutive rows are copied at once.
 */
export function takeRows(t: Tensor, rows: readonly number[]): Tensor {
  const n = t.shape[0];
  if (t.shape.length === 0) throw new ShapeError('takeRows: a scalar has no rows');
  rows.forEach((r, i) => {
    if (!Number.isInteger(r) || r < 0 || r >= n) throw new ShapeError(`takeRows: rows[${i}] = ${r} is not a row of [${t.shape.join(', ')}]`);
  });
  const rt = t.storage.rt;
  const out = empty([rows.length, ...t.shape.slice(1)], t.dtype, rt);
  const rowBytes = n === 0 ? 0 : t.bytes / n;
  for (let i = 0; i < rows.length;) {
    let j = i + 1;
    while (j < rows.length && rows[j] === rows[j - 1] + 1) j++;
    rt.copy(t.buffer, rows[i] * rowBytes, out.buffer, i * rowBytes, (j - i) * rowBytes);
    i = j;
  }
  return out;
}
