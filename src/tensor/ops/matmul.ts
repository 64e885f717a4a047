// Differentiable matrix products: `matmul` (2D or batched, optionally transposed
// operands) and `linear` (x @ W^T + b, W in PyTorch's [out, in] layout). Backward
// passes call the transposed kernel variants directly, never materialised
// transposes; a weight shared across the batch gets its gradient from one matmul
// over the flattened rows.

import type { MatmulArgs } from '../../kernels/matmul/args.ts';
import { matmul as matmulKernel } from '../../kernels/matmul/matmul.ts';
import { forwardMatmul, gradientMatmuls } from '../../kernels/matmul/precision.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { broadcastShapes, fmt, numel, sameShape, type Shape } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';
import { reduceAxes } from './reduce_axes.ts';

export interface MatmulOptions {
  /** a holds [..., k, m] and is used transposed. */
  transA?: boolean;
  /** b holds [..., n, k] and is used transposed. */
  transB?: boolean;
}

interface Plan {
  m: number;
  n: number;
  k: number;
  batch: number;
  strideA: number;
  strideB: number;
  /** Leading (batch) dims of the result. */
  lead: number[];
}

const shown = (s: Shape, t: boolean) => `${fmt(s)}${t ? '^T' : ''}`;

function plan(a: Shape, b: Shape, transA: boolean, transB: boolean): Plan {
  const what = `matmul: ${shown(a, transA)} @ ${shown(b, transB)}`;
  if (a.length < 2 || b.length < 2) throw new ShapeError(`${what}: both operands need at least 2 dims`);
  const [ra, ca] = a.slice(-2);
  const [rb, cb] = b.slice(-2);
  const [m, ka] = transA ? [ca, ra] : [ra, ca];
  const [kb, n] = transB ? [cb, rb] : [rb, cb];
  if (ka !== kb) throw new ShapeError(`${what}: inner dimensions ${ka} and ${kb} differ`);
  const leadA = a.slice(0, -2);
  const leadB = b.slice(0, -2);
  const batchA = numel(leadA);
  const batchB = numel(leadB);
  let lead: number[];
  if (sameShape(leadA, leadB)) lead = [...leadA];
  else if (batchA === 1 || batchB === 1) lead = broadcastShapes('matmul', leadA, leadB);
  else throw new ShapeError(`${what}: batch dims ${fmt(leadA)} and ${fmt(leadB)} differ (only equal batch dims or one unbatched operand are supported)`);
  const batch = numel(lead);
  return {
    m, n, k: ka, batch, lead,
    strideA: batchA === 1 ? 0 : m * ka,
    strideB: batchB === 1 ? 0 : ka * n,
  };
}

// A batched, non-transposed A against a shared B is one tall matmul over all rows.
const foldsBatch = (pl: Plan, transA: boolean) => pl.batch > 1 && pl.strideB === 0 && pl.strideA !== 0 && !transA;

/** The product without autograd. */
function product(a: Tensor, b: Tensor, transA: boolean, transB: boolean, pl = plan(a.shape, b.shape, transA, transB)): Tensor {
  expectDType('matmul', 'a', a.dtype, 'f32');
  expectDType('matmul', 'b', b.dtype, 'f32');
  const rt = a.storage.rt;
  const out = empty([...pl.lead, pl.m, pl.n], 'f32', rt);
  const fold = foldsBatch(pl, transA);
  matmulKernel(rt, {
    a: a.buffer, b: b.buffer, out: out.buffer, transA, transB,
    m: fold ? pl.batch * pl.m : pl.m, n: pl.n, k: pl.k,
    batch: fold ? 1 : pl.batch, strideA: pl.strideA, strideB: pl.strideB, strideC: pl.m * pl.n,
  });
  return out;
}

/** Sums a gradient computed per batch over the leading dims a broadcast operand lacked. */
function sumToShape(g: Tensor, shape: Shape): Tensor {
  if (g.size === numel(shape)) {
    const v = g.view(shape);
    g.dispose();
    return v;
  }
  const r = reduceAxes(g, g.shape.slice(0, -2).map((_, i) => i), 'sum');
  g.dispose();
  const v = r.view(shape);
  r.dispose();
  return v;
}

/** [..., r, c] as [rows, c] (a view). */
function flatRows(t: Tensor): Tensor {
  return t.view([numel(t.shape.slice(0, -1)), t.shape[t.rank - 1]]);
}

// d op(A) = g @ op(B)^T. With A shared across the batch the per-batch products are
// summed afterwards (their rows are not contiguous across batches).
function gradA(a: Tensor, b: Tensor, g: Tensor, transA: boolean, transB: boolean): Tensor {
  const full = transA ? product(b, g, transB, true) : product(g, b, false, !transB);
  return sumToShape(full, a.shape);
}

// d op(B) = op(A)^T @ g. With B shared and A not transposed, the batch folds into
// the contraction: one matmul over all rows sums the per-batch products.
function gradB(a: Tensor, b: Tensor, g: Tensor, pl: Plan, transA: boolean, transB: boolean): Tensor {
  if (foldsBatch(pl, transA)) {
    const af = flatRows(a);
    const gf = flatRows(g);
    const r = transB ? product(gf, af, true, false) : product(af, gf, true, false);
    af.dispose();
    gf.dispose();
    const v = r.view(b.shape);
    r.dispose();
    return v;
  }
  const full = transB ? product(g, a, true, transA) : product(a, g, !transA, false);
  return sumToShape(full, b.shape);
}

/**
 * op(a) @ op(b) over the last two dims, op transposing when asked. Leading dims must
 * match, or one operand has none (or only 1s) and is shared across the other's batch.
 */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  const transA = opts.transA ?? false;
  const transB = opts.transB ?? false;
  const pl = plan(a.shape, b.shape, transA, transB);
  const out = product(a, b, transA, transB, pl);
  return record(out, 'matmul', [a, b], (g) => [
    a.requiresGrad ? gradA(a, b, g, transA, transB) : null,
    b.requiresGrad ? gradB(a, b, g, pl, transA, transB) : null,
  ]);
}

/** x @ weight^T + bias, weight [out, in] (PyTorch layout), x [..., in] -> [..., out]. */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor): Tensor {
  expectDType('linear', 'x', x.dtype, 'f32');
  expectDType('linear', 'weight', weight.dtype, 'f32');
  if (bias) expectDType('linear', 'bias', bias.dtype, 'f32');
  const what = `linear: x ${fmt(x.shape)}, weight ${fmt(weight.shape)}${bias ? `, bias ${fmt(bias.shape)}` : ''}`;
  if (weight.rank !== 2) throw new ShapeError(`${what}: weight must be [out, in]`);
  const [outF, inF] = weight.shape;
  if (x.rank < 1 || x.shape[x.rank - 1] !== inF) throw new ShapeError(`${what}: x's last dim must be in = ${inF}`);
  if (bias && (bias.rank !== 1 || bias.shape[0] !== outF)) throw new ShapeError(`${what}: bias must be [${outF}]`);
  const rows = numel(x.shape.slice(0, -1));
  const rt = x.storage.rt;
  const y = empty([...x.shape.slice(0, -1), outF], 'f32', rt);
  forwardMatmul(rt, { a: x.buffer, b: weight.buffer, bias: bias?.buffer, out: y.buffer, m: rows, n: outF, k: inF, transB: true });
  const inputs = bias ? [x, weight, bias] : [x, weight];
  return record(y, 'linear', inputs, (g) => {
    let dx: Tensor | null = null;
    let dw: Tensor | null = null;
    let db: Tensor | null = null;
    const products: MatmulArgs[] = [];
    if (x.requiresGrad) {
      dx = empty(x.shape, 'f32', rt);
      products.push({ a: g.buffer, b: weight.buffer, out: dx.buffer, m: rows, n: inF, k: outF });
    }
    if (weight.requiresGrad) {
      dw = empty(weight.shape, 'f32', rt);
      products.push({ a: g.buffer, b: x.buffer, out: dw.buffer, m: outF, n: inF, k: rows, transA: true });
    }
    gradientMatmuls(rt, g.buffer, rows * outF, products);
    if (bias?.requiresGrad) {
      const g2 = g.view([rows, outF]);
      db = reduceAxes(g2, [0], 'sum');
      g2.dispose();
    }
    return bias ? [dx, dw, db] : [dx, dw];
  });
}
