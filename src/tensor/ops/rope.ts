// Rotary position embedding in the Hugging Face (Qwen) layout, with partial rotary.

import * as kernel from '../../kernels/rope.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

export interface RopeOptions {
  /** Base of the inverse frequencies (rope_theta: 10000 for Qwen2, 1e6 for Qwen3). */
  theta: number;
  /** Leading dims of each head that rotate (even, <= D); the rest pass through. Defaults to D. */
  rotaryDim?: number;
}

function ropeDims(x: Tensor, positions: Tensor, opts: RopeOptions): kernel.RopeDims {
  const op = 'ropeHeads';
  expectDType(op, 'x', x.dtype, 'f32');
  expectDType(op, 'positions', positions.dtype, 'i32', 'u32');
  if (x.rank !== 4) throw new ShapeError(`${op}: x must be [B, T, H, D], got ${fmt(x.shape)}`);
  const [b, t, h, hd] = x.shape;
  if (positions.rank !== 2 || positions.shape[0] !== b || positions.shape[1] !== t) {
    throw new ShapeError(`${op}: positions ${fmt(positions.shape)} must be [${b}, ${t}] for x ${fmt(x.shape)}`);
  }
  const rotaryDim = opts.rotaryDim ?? hd;
  if (!Number.isInteger(rotaryDim) || rotaryDim < 2 || rotaryDim % 2 !== 0 || rotaryDim > hd) {
    throw new ShapeError(`${op}: rotaryDim ${rotaryDim} must be even and in [2, ${hd}] for x ${fmt(x.shape)}`);
  }
  if (!(opts.theta > 0)) throw new RangeError(`${op}: theta must be positive, got ${opts.theta}`);
  return { b, h, t, hd, rotaryDim, theta: opts.theta };
}

/**
 * Rotates x [B, T, H, D], as the projections give it, by the angles of `positions`
 * [B, T] (i32 position ids, so left-padded rows can start at 0), into [B, H, T, D], as
 * attention reads it: dim i < rotaryDim/2 pairs with i + rotaryDim/2 (rotate_half) at
 * angle position * theta^(-2i / rotaryDim). The head permute rides along in the same
 * pass (the backward rotates back into x's layout), so no permuted copy is made or kept
 * on the tape.
 */
export function ropeHeads(x: Tensor, positions: Tensor, opts: RopeOptions): Tensor {
  const d = ropeDims(x, positions, opts);
  const rt = x.storage.rt;
  const y = empty([d.b, d.h, d.t, d.hd], 'f32', rt);
  kernel.rope(rt, d, x.buffer, positions.buffer, y.buffer, false, { x: 'tokens', y: 'heads' });
  return record(y, 'ropeHeads', [x], (g) => {
    const dx = empty(x.shape, 'f32', rt);
    kernel.rope(rt, d, g.buffer, positions.buffer, dx.buffer, true, { x: 'heads', y: 'tokens' });
    return [dx];
  });
}
