// Token embedding lookup. Ids that take part in a gradient are known on the CPU (the
// backward groups positions by id); a decoding step may instead read the ids the
// sampler left on the GPU, so that the next step is recorded before they come back.

import * as ek from '../../kernels/embedding.ts';
import { record, recordsGradient } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { checkShape, fmt, numel, type Shape } from '../shape.ts';
import { empty, tensor, zeros, type Tensor } from '../tensor.ts';

/**
 * Rows of `weight` [vocab, hidden] picked by token ids, shape [...ids shape, hidden].
 * Ids come either as a host Int32Array (uploaded here; `shape` defaults to [length]),
 * as an i32 tensor already on the GPU together with its host copy, or as an i32
 * tensor alone (`shape` defaults to its own): such ids are not checked on the host
 * (the sampler writes ids below its logits' width) and no gradient flows through.
 */
export function embedding(weight: Tensor, ids: Int32Array, shape?: Shape): Tensor;
export function embedding(weight: Tensor, ids: Tensor, host: Int32Array): Tensor;
export function embedding(weight: Tensor, ids: Tensor, shape?: Shape): Tensor;
export function embedding(weight: Tensor, ids: Int32Array | Tensor, extra?: Shape | Int32Array): Tensor;
export function embedding(weight: Tensor, ids: Int32Array | Tensor, extra?: Shape | Int32Array): Tensor {
  expectDType('embedding', 'weight', weight.dtype, 'f32');
  if (weight.rank !== 2) throw new ShapeError(`embedding: weight must be [vocab, hidden], got ${fmt(weight.shape)}`);
  const [vocab, hidden] = weight.shape;
  const rt = weight.storage.rt;

  let host: Int32Array;
  let idsShape: Shape;
  let gpuIds: Tensor;
  let owned = false;
  if (ids instanceof Int32Array) {
    if (extra instanceof Int32Array) throw new ShapeError('embedding: host ids need a shape, not a second id array');
    idsShape = extra ?? [ids.length];
    checkShape('embedding', idsShape);
    if (numel(idsShape) !== ids.length) throw new ShapeError(`embedding: ${ids.length} ids do not fill shape ${fmt(idsShape)}`);
    host = Int32Array.from(ids);
    gpuIds = tensor(host, idsShape, 'i32', rt);
    owned = true;
  } else if (extra instanceof Int32Array) {
    expectDType('embedding', 'ids', ids.dtype, 'i32');
    if (extra.length !== ids.size) throw new ShapeError(`embedding: host copy has ${extra.length} ids, the ids tensor ${fmt(ids.shape)} has ${ids.size}`);
    idsShape = ids.shape;
    // A private copy: the caller may reuse its array before backward runs.
    host = Int32Array.from(extra);
    gpuIds = ids;
  } else {
    return gatherDeviceIds(weight, ids, extra ?? ids.shape);
  }
  for (let i = 0; i < host.length; i++) {
    if (host[i] < 0 || host[i] >= vocab) throw new ShapeError(`embedding: id ${host[i]} at position ${i} is outside the vocabulary [0, ${vocab}) of weight ${fmt(weight.shape)}`);
  }

  const out = empty([...idsShape, hidden], 'f32', rt);
  ek.gather(rt, weight.buffer, gpuIds.buffer, out.buffer, host.length, hidden, vocab);
  if (owned) gpuIds.dispose();

  return record(out, 'embedding', [weight], (g) => {
    const plan = ek.planByToken(host);
    const planT = tensor(plan.data, [plan.data.length], 'u32', rt);
    const dw = zeros(weight.shape, 'f32', rt);
    ek.grad(rt, g.buffer, planT.buffer, plan.unique, dw.buffer, hidden, vocab);
    planT.dispose();
    return [dw];
  });
}

function gatherDeviceIds(weight: Tensor, ids: Tensor, shape: Shape): Tensor {
  expectDType('embedding', 'ids', ids.dtype, 'i32');
  checkShape('embedding', shape);
  if (numel(shape) !== ids.size) throw new ShapeError(`embedding: ids ${fmt(ids.shape)} do not fill shape ${fmt(shape)}`);
  if (recordsGradient([weight])) {
    throw new ShapeError('embedding: ids without a host copy give the weight no gradient; run under noGrad or pass the host ids');
  }
  const [vocab, hidden] = weight.shape;
  const out = empty([...shape, hidden], 'f32', weight.storage.rt);
  ek.gather(weight.storage.rt, weight.buffer, ids.buffer, out.buffer, ids.size, hidden, vocab);
  return out;
}
