// f16 copies of weights, for the decode kernels that read them (tensor/ops/decode.ts,
// shaders/matmul/skinny_f16.wgsl): a decode step reads every weight once per token,
// so halving the weights' bytes halves most of its memory traffic. A copy is made
// from the f32 weight on the GPU (the f32 weight stays the master that training
// updates).

import { packF16 } from '../../kernels/half.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { keep } from '../scope.ts';
import { empty, type Tensor } from '../tensor.ts';

/** A weight [rows, cols] held as f16 pairs. */
export interface HalfWeight {
  /** u32 [rows, cols / 2]: element 2j of a row in the low half of word j. */
  readonly packed: Tensor;
  /** The weight's shape. */
  readonly shape: readonly [number, number];
}

export function isHalfWeight(w: Tensor | HalfWeight): w is HalfWeight {
  return 'packed' in w;
}

function checkWeight(op: string, w: Tensor): [number, number] {
  expectDType(op, 'weight', w.dtype, 'f32');
  if (w.rank !== 2 || w.shape[1] % 2 !== 0) throw new ShapeError(`${op}: weight ${fmt(w.shape)} is not [rows, cols] with an even number of columns`);
  return [w.shape[0], w.shape[1]];
}

/**
 * An f16 copy of the f32 weight `w` (each value rounded to the nearest f16, clamped
 * to the f16 range). It belongs to no scope: the caller disposes `packed`.
 */
export function halfWeight(w: Tensor): HalfWeight {
  const shape = checkWeight('halfWeight', w);
  const packed = keep(empty([shape[0], shape[1] / 2], 'u32', w.storage.rt));
  packF16(w.storage.rt, w.buffer, packed.buffer, w.size);
  return { packed, shape };
}

/**
 * One f16 copy of f32 weights [rows_i, cols] stacked along rows, [sum rows_i, cols]
 * (a layer's q, k and v projections as one product). It belongs to no scope.
 */
export function stackedHalfWeight(ws: readonly Tensor[]): HalfWeight {
  if (ws.length === 0) throw new ShapeError('stackedHalfWeight: no weights');
  const shapes = ws.map((w) => checkWeight('stackedHalfWeight', w));
  const cols = shapes[0][1];
  if (shapes.some(([, c]) => c !== cols)) throw new ShapeError(`stackedHalfWeight: weights ${ws.map((w) => fmt(w.shape)).join(' ')} differ in columns`);
  const rows = shapes.reduce((n, [r]) => n + r, 0);
  const rt = ws[0].storage.rt;
  const packed = keep(empty([rows, cols / 2], 'u32', rt));
  let word = 0;
  for (const w of ws) {
    packF16(rt, w.buffer, packed.buffer, w.size, word);
    word += w.size / 2;
  }
  return { packed, shape: [rows, cols] };
}
