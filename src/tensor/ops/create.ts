import * as ew from '../../kernels/elementwise.ts';
import { runtime, type Runtime } from '../../gpu/runtime.ts';
import type { DType } from '../dtype.ts';
import { expectDType } from '../dtype.ts';
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
