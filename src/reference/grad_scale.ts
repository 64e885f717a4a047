// CPU reference for shaders/grad_scale.wgsl: the power-of-two scale s with
// max|x| * s in [2^13, 2^14), and 1 for empty, all-zero or non-finite input.

/** The exponent max|x| * s lands below: 2^14. */
export const GRAD_SCALE_EXP = 14;

/** [s, 1 / s] for the values `x`. */
export function gradScale(x: ArrayLike<number>): [number, number] {
  let m = 0;
  for (let i = 0; i < x.length; i++) {
    const v = Math.abs(x[i]);
    if (!Number.isFinite(v)) return [1, 1];
    if (v > m) m = v;
  }
  if (m === 0) return [1, 1];
  // m = f * 2^e with f in [0.5, 1), as frexp gives it.
  let e = Math.floor(Math.log2(m)) + 1;
  if (2 ** (e - 1) > m) e--;
  else if (2 ** e <= m) e++;
  e = Math.min(100, Math.max(-100, e));
  return [2 ** (GRAD_SCALE_EXP - e), 2 ** (e - GRAD_SCALE_EXP)];
}
