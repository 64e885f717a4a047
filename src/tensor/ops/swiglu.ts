// SwiGLU activation of the gated MLP, fused forward and backward.

import * as sk from '../../kernels/swiglu.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt, sameShape } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

/** silu(gate) * up for two tensors of one shape. */
export function swiglu(gate: Tensor, up: Tensor): Tensor {
  expectDType('swiglu', 'gate', gate.dtype, 'f32');
  expectDType('swiglu', 'up', up.dtype, 'f32');
  if (!sameShape(gate.shape, up.shape)) throw new ShapeError(`swiglu: gate ${fmt(gate.shape)} and up ${fmt(up.shape)} differ in shape`);
  const rt = gate.storage.rt;
  const y = empty(gate.shape, 'f32', rt);
  sk.forward(rt, gate.buffer, up.buffer, y.buffer, y.size);
  return record(y, 'swiglu', [gate, up], (g) => {
    // One pass writes both gradients; one the graph does not need is dropped.
    const dgate = empty(gate.shape, 'f32', rt);
    const dup = empty(up.shape, 'f32', rt);
    sk.backward(rt, gate.buffer, up.buffer, g.buffer, dgate.buffer, dup.buffer, y.size);
    if (!gate.requiresGrad) dgate.dispose();
    if (!up.requiresGrad) dup.dispose();
    return [gate.requiresGrad ? dgate : null, up.requiresGrad ? dup : null];
  });
}
