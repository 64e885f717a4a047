// A linear projection with a LoRA branch as one differentiable op:
//   y = x W^T + b + s (x A^T) B^T,   W [out, in], A [r, in], B [out, r], s = alpha / r.
// Composed from separate ops, the branch wrote three more outputs of the layer's width
// (its up-projection, that times s, and the sum with the base), all kept on the tape,
// each read again in the backward. Here the branch's up-projection accumulates into the
// base output in the product's epilogue, so the op writes its output once and keeps,
// beside x, only the branch's [rows, r] activation s x A^T. The backward groups the
// products by the gradient they read: g W, g B and g^T (s x A^T) share one scale of g
// on tensor cores (precision.ts), then d = s g B gives d A (accumulated into dx) and
// d^T x.

import * as ew from '../../kernels/elementwise.ts';
import type { MatmulArgs } from '../../kernels/matmul/args.ts';
import { forwardMatmul, gradientMatmuls } from '../../kernels/matmul/precision.ts';
import { record, recordsGradient } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt, numel } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';
import { reduceAxes } from './reduce_axes.ts';

/** x W^T + bias + scaling (x A^T) B^T for x [..., in], weight [out, in], a [r, in], b [out, r] -> [..., out]. */
export function loraLinear(x: Tensor, weight: Tensor, bias: Tensor | undefined, a: Tensor, b: Tensor, scaling: number): Tensor {
  for (const [name, t] of [['x', x], ['weight', weight], ['a', a], ['b', b], ...(bias ? [['bias', bias] as const] : [])] as const) expectDType('loraLinear', name, t.dtype, 'f32');
  const what = () => `loraLinear: x ${fmt(x.shape)}, weight ${fmt(weight.shape)}, a ${fmt(a.shape)}, b ${fmt(b.shape)}${bias ? `, bias ${fmt(bias.shape)}` : ''}`;
  if (weight.rank !== 2 || a.rank !== 2 || b.rank !== 2) throw new ShapeError(`${what()}: weight, a and b must be matrices`);
  const [outF, inF] = weight.shape;
  const r = a.shape[0];
  if (a.shape[1] !== inF || b.shape[0] !== outF || b.shape[1] !== r) throw new ShapeError(`${what()}: a must be [r, ${inF}] and b [${outF}, r]`);
  if (x.rank < 1 || x.shape[x.rank - 1] !== inF) throw new ShapeError(`${what()}: x's last dim must be in = ${inF}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== outF)) throw new ShapeError(`${what()}: bias must be [${outF}]`);
  if (!Number.isFinite(scaling)) throw new RangeError(`loraLinear: scaling must be finite, got ${scaling}`);
  const rows = numel(x.shape.slice(0, -1));
  const rt = x.storage.rt;
  // s x A^T: the branch's activation, the one thing of it the backward reads.
  const down = empty([rows, r], 'f32', rt);
  forwardMatmul(rt, { a: x.buffer, b: a.buffer, out: down.buffer, m: rows, n: r, k: inF, transB: true });
  const branch = empty([rows, r], 'f32', rt);
  ew.unary(rt, 'affine', down.buffer, branch.buffer, rows * r, scaling, 0);
  down.dispose();
  const y = empty([...x.shape.slice(0, -1), outF], 'f32', rt);
  forwardMatmul(rt, { a: x.buffer, b: weight.buffer, bias: bias?.buffer, out: y.buffer, m: rows, n: outF, k: inF, transB: true });
  forwardMatmul(rt, { a: branch.buffer, b: b.buffer, out: y.buffer, m: rows, n: outF, k: r, transB: true, accumulate: true });
  const inputs = bias ? [x, weight, bias, a, b] : [x, weight, a, b];
  if (!recordsGradient(inputs)) {
    branch.dispose();
    return y;
  }
  return record(y, 'loraLinear', inputs, (g) => {
    const dx = x.requiresGrad ? empty(x.shape, 'f32', rt) : null;
    const dw = weight.requiresGrad ? empty(weight.shape, 'f32', rt) : null;
    const da = a.requiresGrad ? empty(a.shape, 'f32', rt) : null;
    const db = b.requiresGrad ? empty(b.shape, 'f32', rt) : null;
    // g B: the gradient reaching the branch's activation, before its scale.
    const up = dx || da ? empty([rows, r], 'f32', rt) : null;
    const fromG: MatmulArgs[] = [];
    if (dx) fromG.push({ a: g.buffer, b: weight.buffer, out: dx.buffer, m: rows, n: inF, k: outF });
    if (dw) fromG.push({ a: g.buffer, b: x.buffer, out: dw.buffer, m: outF, n: inF, k: rows, transA: true });
    if (up) fromG.push({ a: g.buffer, b: b.buffer, out: up.buffer, m: rows, n: r, k: outF });
    if (db) fromG.push({ a: g.buffer, b: branch.buffer, out: db.buffer, m: outF, n: r, k: rows, transA: true });
    gradientMatmuls(rt, g.buffer, rows * outF, fromG);
    if (up) {
      const d = empty([rows, r], 'f32', rt);
      ew.unary(rt, 'affine', up.buffer, d.buffer, rows * r, scaling, 0);
      up.dispose();
      const fromD: MatmulArgs[] = [];
      if (dx) fromD.push({ a: d.buffer, b: a.buffer, out: dx.buffer, m: rows, n: inF, k: r, accumulate: true });
      if (da) fromD.push({ a: d.buffer, b: x.buffer, out: da.buffer, m: r, n: inF, k: rows, transA: true });
      gradientMatmuls(rt, d.buffer, rows * r, fromD);
      d.dispose();
    }
    let dBias: Tensor | null = null;
    if (bias?.requiresGrad) {
      const g2 = g.view([rows, outF]);
      dBias = reduceAxes(g2, [0], 'sum');
      g2.dispose();
    }
    branch.dispose();
    return bias ? [dx, dw, dBias, da, db] : [dx, dw, da, db];
  });
}
