// CPU reference for shaders/grad_scale.wgsl: the power-of-two scale s with
// max|x| * s in [2^13, 2^14), and 1 for empty, all-zero or non-finite input; and the
// scale for a sum of products, with terms * max|a| * max|b| * s in that range.

/** The exponent max|x| * s lands below: 2^14. */
export const GRAD_SCALE_EXP = 14;

/** [s, 1 / s] for the values `x`. */
export function gradScale(x: ArrayLike<number>): [number, number] {
  const m = absmax(x);
  return m > 0 ? powerOfTwo(m) : [1, 1];
}

/** [s, 1 / s] for sums of `terms` products of an element of `a` and one of `b`; the bound is formed in f32 as the kernel forms it. */
export function productScale(a: ArrayLike<number>, b: ArrayLike<number>, terms: number): [number, number] {
  const m = Math.fround(Math.fround(terms * absmax(a)) * absmax(b));
  return m > 0 && Number.isFinite(m) ? powerOfTwo(m) : [1, 1];
}

/** max|x|: 0 when empty, NaN when any value is not finite. */
function absmax(x: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < x.length; i++) {
    const v = Math.abs(x[i]);
    if (!Number.isFinite(v)) return NaN;
    if (v > m) m = v;
  }
  return m;
}

function powerOfTwo(m: number): [number, number] {
  // m = f * 2^e with f in [0.5, 1), as frexp gives it.
  let e = Math.floor(Math.log2(m)) + 1;
  if (2 ** (e - 1) > m) e--;
  else if (2 ** e <= m) e++;
  e = Math.min(100, Math.max(-100, e));
  return [2 ** (GRAD_SCALE_EXP - e), 2 ** (e - GRAD_SCALE_EXP)];
}
