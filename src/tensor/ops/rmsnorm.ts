// RMSNorm over the last dim (Qwen's RMSNorm and its per-head q/k-norm).

import * as rn from '../../kernels/rmsnorm.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

/** y = x / sqrt(mean(x^2, last dim) + eps) * weight, for x [..., h] and weight [h]. */
export function rmsNorm(x: Tensor, weight: Tensor, eps = 1e-6): Tensor {
  expectDType('rmsNorm', 'x', x.dtype, 'f32');
  expectDType('rmsNorm', 'weight', weight.dtype, 'f32');
  const h = x.shape[x.rank - 1];
  if (x.rank === 0 || weight.rank !== 1 || weight.shape[0] !== h) {
    throw new ShapeError(`rmsNorm: weight ${fmt(weight.shape)} does not match the last dim of x ${fmt(x.shape)}`);
  }
  if (!(eps >= 0)) throw new ShapeError(`rmsNorm: eps must be >= 0, got ${eps}`);
  const rt = x.storage.rt;
  const rows = h === 0 ? 0 : x.size / h;
  const y = empty(x.shape, 'f32', rt);
  const rstd = empty([rows], 'f32', rt);
  rn.forward(rt, x.buffer, weight.buffer, y.buffer, rstd.buffer, rows, h, eps);
  record(y, 'rmsNorm', [x, weight], (g) => {
    let dx: Tensor | null = null;
    let dw: Tensor | null = null;
    if (x.requiresGrad) {
      dx = empty(x.shape, 'f32', rt);
      rn.backwardDx(rt, x.buffer, weight.buffer, g.buffer, rstd.buffer, dx.buffer, rows, h);
    }
    if (weight.requiresGrad) {
      dw = empty([h], 'f32', rt);
      const blocks = rn.dwBlocks(rows);
      const partial = blocks > 1 ? empty([blocks, h], 'f32', rt) : null;
      rn.backwardDw(rt, x.buffer, g.buffer, rstd.buffer, partial?.buffer ?? null, dw.buffer, rows, h);
      partial?.dispose();
    }
    return [dx, dw];
  });
  if (!y.requiresGrad) rstd.dispose();
  return y;
}
