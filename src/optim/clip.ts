// Global gradient norm and clipping. The norm is summed on the GPU (partial sums of
// squares per tensor into one buffer, one final reduction) and read back once; the
// clipping factor is not applied here but handed to AdamW.step, which scales the
// gradients as it reads them.

import * as ak from '../kernels/adamw.ts';
import { reduce } from '../kernels/reduce.ts';
import { empty, type Tensor } from '../tensor/tensor.ts';

/**
 * sqrt of the sum of squares of every element of every parameter's `.grad` (0 when none
 * has one); NaN when any gradient element is NaN or infinite.
 */
export async function globalGradNorm(params: readonly Tensor[]): Promise<number> {
  const grads = params.flatMap((p) => (p.grad && p.grad.size > 0 ? [p.grad] : []));
  if (grads.length === 0) return 0;
  const rt = grads[0].storage.rt;
  const counts = grads.map((g) => ak.sumsqPartialCount(g.size));
  const total = counts.reduce((a, b) => a + b, 0);
  // Row 0: partial sums of squares; row 1: partial counts of non-finite elements.
  const partials = empty([2, total], 'f32', rt);
  let offset = 0;
  grads.forEach((g, i) => {
    ak.sumsq(rt, g.buffer, g.size, partials.buffer, offset, total);
    offset += counts[i];
  });
  const sums = empty([2], 'f32', rt);
  reduce(rt, 'sum', partials.buffer, sums.buffer, 2, total, 1);
  partials.dispose();
  try {
    const [sumSq, nonFinite] = await sums.toArray();
    return nonFinite === 0 ? Math.sqrt(sumSq) : Number.NaN;
  } finally {
    sums.dispose();
  }
}

export interface ClipResult {
  /** The global gradient norm before clipping. */
  norm: number;
  /** Factor for AdamW.step's gradScale: min(1, maxNorm / (norm + 1e-6)), 0 when not finite. */
  scale: number;
  /** False when a gradient holds NaN or infinity, or the sum of squares overflows f32: skip the update. */
  finite: boolean;
}

/** torch.nn.utils.clip_grad_norm_'s factor, without rewriting the gradients. */
export async function clipGradNorm(params: readonly Tensor[], maxNorm: number): Promise<ClipResult> {
  if (!(maxNorm > 0)) throw new RangeError(`clipGradNorm: maxNorm must be > 0, got ${maxNorm}`);
  const norm = await globalGradNorm(params);
  const finite = Number.isFinite(norm);
  return { norm, scale: finite ? Math.min(1, maxNorm / (norm + 1e-6)) : 0, finite };
}
