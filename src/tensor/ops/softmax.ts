// Differentiable softmax and log-softmax over the last axis.

import * as sk from '../../kernels/softmax.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

function rowwise(op: string, x: Tensor, log: boolean): Tensor {
  expectDType(op, 'input', x.dtype, 'f32');
  if (x.rank === 0) throw new ShapeError(`${op}: input ${fmt(x.shape)} has no last axis`);
  const n = x.shape[x.rank - 1];
  const rows = n === 0 ? 0 : x.size / n;
  const rt = x.storage.rt;
  const y = empty(x.shape, 'f32', rt);
  sk.softmaxForward(rt, x.buffer, y.buffer, rows, n, log);
  return record(y, op, [x], (g) => {
    const dx = empty(x.shape, 'f32', rt);
    sk.softmaxBackward(rt, y.buffer, g.buffer, dx.buffer, rows, n, log);
    return [dx];
  });
}

/** exp(x) / sum(exp(x)) along the last axis. */
export function softmax(x: Tensor): Tensor {
  return rowwise('softmax', x, false);
}

/** x - logsumexp(x) along the last axis. */
export function logSoftmax(x: Tensor): Tensor {
  return rowwise('logSoftmax', x, true);
}
