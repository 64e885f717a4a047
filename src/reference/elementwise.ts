// CPU references for the elementwise, reduction and copy kernels (plain loops, f64 math).

import { broadcastShapes, numel, stridesOf } from '../tensor/shape.ts';

const sig = (x: number) => 1 / (1 + Math.exp(-x));

export const unaryRef: Record<string, (x: number, a: number, b: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  silu: (x) => x * sig(x),
  sigmoid: sig,
  tanh: Math.tanh,
  relu: (x) => Math.max(x, 0),
  abs: Math.abs,
  square: (x) => x * x,
  recip: (x) => 1 / x,
  affine: (x, a, b) => x * a + b,
  clamp: (x, a, b) => Math.min(Math.max(x, a), b),
  pow: (x, a) => Math.pow(x, a),
};

export function unary(op: string, x: Float32Array, a = 0, b = 0): Float32Array {
  const f = unaryRef[op];
  return x.map((v) => f(v, a, b));
}

export const binaryRef: Record<string, (a: number, b: number) => number> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
  maximum: Math.max,
  minimum: Math.min,
};

export function binary(op: string, a: Float32Array, as: readonly number[], b: Float32Array, bs: readonly number[]): { data: Float32Array; shape: number[] } {
  const shape = broadcastShapes(op, as, bs);
  const n = numel(shape);
  const out = new Float32Array(n);
  const sa = bcast(as, shape);
  const sb = bcast(bs, shape);
  const f = binaryRef[op];
  for (let i = 0; i < n; i++) {
    let rem = i;
    let ia = 0;
    let ib = 0;
    for (let d = shape.length - 1; d >= 0; d--) {
      const c = rem % shape[d];
      rem = Math.floor(rem / shape[d]);
      ia += c * sa[d];
      ib += c * sb[d];
    }
    out[i] = f(a[ia], b[ib]);
  }
  return { data: out, shape };
}

function bcast(from: readonly number[], to: readonly number[]): number[] {
  const s = stridesOf(from);
  const lead = to.length - from.length;
  return to.map((_, i) => (i < lead || from[i - lead] === 1 ? 0 : s[i - lead]));
}

/** Reduction over `axes` (removed from the shape). */
export function reduce(op: 'sum' | 'mean' | 'max', x: Float32Array, shape: readonly number[], axes: readonly number[]): { data: Float32Array; shape: number[] } {
  const outShape = shape.filter((_, i) => !axes.includes(i));
  const outStrides = stridesOf(outShape);
  const out = new Float64Array(numel(outShape)).fill(op === 'max' ? -Infinity : 0);
  const count = numel(axes.map((a) => shape[a]));
  for (let i = 0; i < x.length; i++) {
    let rem = i;
    let j = 0;
    let k = outShape.length - 1;
    for (let d = shape.length - 1; d >= 0; d--) {
      const c = rem % shape[d];
      rem = Math.floor(rem / shape[d]);
      if (!axes.includes(d)) j += c * outStrides[k--];
    }
    out[j] = op === 'max' ? Math.max(out[j], x[i]) : out[j] + x[i];
  }
  if (op === 'mean') for (let j = 0; j < out.length; j++) out[j] /= count;
  return { data: Float32Array.from(out), shape: outShape };
}

export function permute(x: Float32Array, shape: readonly number[], perm: readonly number[]): Float32Array {
  const outShape = perm.map((p) => shape[p]);
  const inStrides = stridesOf(shape);
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) {
    let rem = i;
    let off = 0;
    for (let d = outShape.length - 1; d >= 0; d--) {
      const c = rem % outShape[d];
      rem = Math.floor(rem / outShape[d]);
      off += c * inStrides[perm[d]];
    }
    out[i] = x[off];
  }
  return out;
}
