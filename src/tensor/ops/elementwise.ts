// Differentiable elementwise ops with NumPy broadcasting, each paired with its derivative.

import * as ew from '../../kernels/elementwise.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { broadcastShapes, sameShape, stridesOf, type Shape } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';
import { reduceAxes } from './reduce_axes.ts';

function unaryOp(op: ew.UnaryOp, x: Tensor, alpha = 0, beta = 0): Tensor {
  expectDType(op, 'input', x.dtype, 'f32');
  const rt = x.storage.rt;
  const y = empty(x.shape, 'f32', rt);
  ew.unary(rt, op, x.buffer, y.buffer, x.size, alpha, beta);
  return record(y, op, [x], (g) => {
    const dx = empty(x.shape, 'f32', rt);
    ew.unaryGrad(rt, op, x.buffer, g.buffer, dx.buffer, x.size, alpha, beta);
    return [dx];
  });
}

export const neg = (x: Tensor) => unaryOp('neg', x);
export const exp = (x: Tensor) => unaryOp('exp', x);
export const log = (x: Tensor) => unaryOp('log', x);
export const sqrt = (x: Tensor) => unaryOp('sqrt', x);
export const rsqrt = (x: Tensor) => unaryOp('rsqrt', x);
export const silu = (x: Tensor) => unaryOp('silu', x);
export const sigmoid = (x: Tensor) => unaryOp('sigmoid', x);
export const tanh = (x: Tensor) => unaryOp('tanh', x);
export const relu = (x: Tensor) => unaryOp('relu', x);
export const abs = (x: Tensor) => unaryOp('abs', x);
export const square = (x: Tensor) => unaryOp('square', x);
export const recip = (x: Tensor) => unaryOp('recip', x);
/** x * scale + shift */
export const affine = (x: Tensor, scale: number, shift = 0) => unaryOp('affine', x, scale, shift);
export const scale = (x: Tensor, s: number) => unaryOp('affine', x, s, 0);
export const addScalar = (x: Tensor, s: number) => unaryOp('affine', x, 1, s);
export const clamp = (x: Tensor, lo: number, hi: number) => unaryOp('clamp', x, lo, hi);
export const pow = (x: Tensor, e: number) => unaryOp('pow', x, e);

/** Sums `g` over the dims that broadcasting expanded, giving a tensor of `shape`. */
export function sumTo(g: Tensor, shape: Shape): Tensor {
  if (sameShape(g.shape, shape)) return g.view(shape);
  const lead = g.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < g.rank; i++) {
    if (i < lead || (shape[i - lead] === 1 && g.shape[i] !== 1)) axes.push(i);
  }
  const r = reduceAxes(g, axes, 'sum');
  const out = r.view(shape);
  r.dispose();
  return out;
}

function binaryRaw(op: ew.BinaryOp, a: Tensor, b: Tensor): Tensor {
  expectDType(op, 'a', a.dtype, 'f32');
  expectDType(op, 'b', b.dtype, 'f32');
  const rt = a.storage.rt;
  if (sameShape(a.shape, b.shape)) {
    const out = empty(a.shape, 'f32', rt);
    ew.binary(rt, op, a.buffer, b.buffer, out.buffer, a.size);
    return out;
  }
  const shape = broadcastShapes(op, a.shape, b.shape);
  const out = empty(shape, 'f32', rt);
  ew.binaryBroadcast(rt, op, a.buffer, b.buffer, out.buffer, shape, bstrides(a.shape, shape), bstrides(b.shape, shape));
  return out;
}

function bstrides(from: Shape, to: Shape): number[] {
  const s = stridesOf(from);
  const lead = to.length - from.length;
  return to.map((_, i) => (i < lead || from[i - lead] === 1 ? 0 : s[i - lead]));
}

export function add(a: Tensor, b: Tensor): Tensor {
  const out = binaryRaw('add', a, b);
  return record(out, 'add', [a, b], (g) => [a.requiresGrad ? sumTo(g, a.shape) : null, b.requiresGrad ? sumTo(g, b.shape) : null]);
}

export function sub(a: Tensor, b: Tensor): Tensor {
  const out = binaryRaw('sub', a, b);
  return record(out, 'sub', [a, b], (g) => {
    let gb: Tensor | null = null;
    if (b.requiresGrad) {
      const ng = neg(g);
      gb = sumTo(ng, b.shape);
      ng.dispose();
    }
    return [a.requiresGrad ? sumTo(g, a.shape) : null, gb];
  });
}

function productGrad(g: Tensor, other: Tensor, shape: Shape): Tensor {
  const t = binaryRaw('mul', g, other);
  const r = sumTo(t, shape);
  t.dispose();
  return r;
}

export function mul(a: Tensor, b: Tensor): Tensor {
  const out = binaryRaw('mul', a, b);
  return record(out, 'mul', [a, b], (g) => [
    a.requiresGrad ? productGrad(g, b, a.shape) : null,
    b.requiresGrad ? productGrad(g, a, b.shape) : null,
  ]);
}

export function div(a: Tensor, b: Tensor): Tensor {
  const out = binaryRaw('div', a, b);
  return record(out, 'div', [a, b], (g) => {
    const ga = a.requiresGrad ? (() => {
      const t = binaryRaw('div', g, b);
      const r = sumTo(t, a.shape);
      t.dispose();
      return r;
    })() : null;
    let gb: Tensor | null = null;
    if (b.requiresGrad) {
      // d(a/b)/db = -(a/b)/b
      const q = binaryRaw('div', out, b);
      const t = binaryRaw('mul', g, q);
      const n = neg(t);
      gb = sumTo(n, b.shape);
      q.dispose();
      t.dispose();
      n.dispose();
    }
    return [ga, gb];
  });
}

// The gradient goes to whichever input equals the result, split evenly on ties
// (as PyTorch does, so max(f, f) has the gradient of f).
function selectGrad(a: Tensor, b: Tensor, out: Tensor) {
  return (g: Tensor): (Tensor | null)[] => {
    const ma = binaryRaw('eq', a, out);
    const mb = binaryRaw('eq', b, out);
    const count = binaryRaw('add', ma, mb);
    const pick = (m: Tensor, x: Tensor) => {
      const share = binaryRaw('div', m, count);
      const r = productGrad(g, share, x.shape);
      share.dispose();
      return r;
    };
    const grads = [a.requiresGrad ? pick(ma, a) : null, b.requiresGrad ? pick(mb, b) : null];
    for (const t of [ma, mb, count]) t.dispose();
    return grads;
  };
}

export function maximum(a: Tensor, b: Tensor): Tensor {
  const out = binaryRaw('maximum', a, b);
  return record(out, 'maximum', [a, b], selectGrad(a, b, out));
}

export function minimum(a: Tensor, b: Tensor): Tensor {
  const out = binaryRaw('minimum', a, b);
  return record(out, 'minimum', [a, b], selectGrad(a, b, out));
}

/** In-place dst += alpha * src (no autograd; gradient accumulation, optimizers). */
export function axpyInPlace(dst: Tensor, src: Tensor, alpha = 1): void {
  if (dst.size !== src.size) throw new Error(`axpyInPlace: sizes ${dst.size} and ${src.size} differ`);
  ew.axpyInPlace(dst.storage.rt, dst.buffer, src.buffer, dst.size, alpha);
}
