// CPU reference for shaders/matmul/tensor.wgsl: the f32 reference (matmul.ts) applied
// to operands rounded to f16 first, as the kernel rounds them when it stages them,
// and a per-element bound on how far the kernel's f32 accumulation may stray from
// that exact (f64) sum; and for the f16 copies of weights (shaders/half.wgsl) that
// the skinny f16 kernels read (their reference: the f32 one on the copies' values). Rounding is IEEE round to nearest, ties to even, computed
// from the numbers themselves (not from bit patterns, so it does not share a bug with
// the bit-level encoder in util/half.ts, which the tests compare it with).

import { matmul, type MatmulRefArgs } from './matmul.ts';

/** Largest finite f16. */
export const F16_MAX = 65504;

/** `x` rounded to the nearest f16 value (ties to even): ±Infinity past the f16 range, NaN and ±0 kept. */
export function roundToF16(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const ax = Math.abs(x);
  // The binade [2^e, 2^(e+1)) of ax; log2 can be off by one next to a power of two.
  let e = Math.floor(Math.log2(ax));
  if (2 ** e > ax) e--;
  else if (2 ** (e + 1) <= ax) e++;
  // f16 has 10 fraction bits; below 2^-14 (subnormals) the spacing stays 2^-24.
  const ulp = 2 ** (Math.max(e, -14) - 10);
  const units = ax / ulp;
  let r = Math.floor(units);
  const rest = units - r;
  if (rest > 0.5 || (rest === 0.5 && r % 2 === 1)) r++;
  const y = r * ulp;
  // Anything at or past 65520 (halfway to the next binade's first value) rounds up out of range.
  return Math.sign(x) * (y > F16_MAX ? Infinity : y);
}

/**
 * What shaders/half.wgsl pack_f16 stores for each element (an f16 copy of a weight):
 * clamped to the finite f16 range, then rounded to f16.
 */
export function packedF16(a: Float32Array): Float32Array {
  return a.map((v) => roundToF16(Math.min(F16_MAX, Math.max(-F16_MAX, v))));
}

/** Every element rounded to f16, as a new array. */
export function roundArrayToF16(a: Float32Array): Float32Array {
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = roundToF16(a[i]);
  return out;
}

/**
 * A as the kernel stages it under SCALE_A with scale `s` (a power of two): s * a
 * rounded to f16, then divided by s again (exact), which is where the kernel's
 * unscaling of each result leaves it.
 */
export function roundScaledToF16(a: Float32Array, s: number): Float32Array {
  if (!(s > 0) || 2 ** Math.round(Math.log2(s)) !== s) throw new Error(`roundScaledToF16: scale ${s} is not a power of two`);
  return a.map((v) => roundToF16(v * s) / s);
}

const roundedA = (a: Float32Array, scaleA: number) => (scaleA === 1 ? roundArrayToF16(a) : roundScaledToF16(a, scaleA));

/**
 * The f16-input product: A and B rounded to f16 (bias and the initial C are not),
 * summed exactly, then rounded to f32; A scaled by `scaleA` before its rounding and
 * the product unscaled, as the kernel does under SCALE_A.
 */
export function matmulF16(args: MatmulRefArgs, scaleA = 1): Float32Array {
  if (args.act && args.act !== 'none') throw new Error('matmulF16: the tensor-core kernel has no activation');
  return matmul({ ...args, a: roundedA(args.a, scaleA), b: roundArrayToF16(args.b) });
}

/**
 * Error allowed per K step of 16, in units of the step's magnitude (below): 32 ulps of
 * f32 (2^-18). Tensor cores sum a step's products and the accumulator in one aligned
 * addition that truncates rather than rounds, losing up to about an ulp of the
 * largest term per term; 32 covers 16 products plus the accumulator with room to spare.
 */
export const F16_STEP_ULPS = 2 ** -18;

/**
 * Per-element bound on |kernel - matmulF16| for the tensor-core kernel: for each
 * 16-deep step s of K (the kernel's order) F16_STEP_ULPS times the step's magnitude,
 * max(|partial sum before|, |partial sum after|, sum of |products| in the step), plus
 * the initial C and bias (which may join the sum at the start or the end), plus a few
 * ulps of the result for the final additions and the reference's own f32 rounding.
 * Far below what rounding the operands to f16 moves a sum (about 2^-11 per operand),
 * so an f32-input result fails it. `scaleA` as in matmulF16 (the bound scales with
 * the operands).
 */
export function matmulF16Tolerance(args: MatmulRefArgs, scaleA = 1): Float32Array {
  const { m, n, k, batch = 1, transA = false, transB = false, accumulate = false } = args;
  const a = roundedA(args.a, scaleA);
  const b = roundArrayToF16(args.b);
  const strideA = args.strideA ?? m * k;
  const strideB = args.strideB ?? k * n;
  const strideC = args.strideC ?? m * n;
  const { offsetA = 0, offsetB = 0, offsetC = 0 } = args;
  const size = batch === 0 ? 0 : offsetC + (batch - 1) * strideC + m * n;
  const tol = new Float32Array(size);
  for (let bi = 0; bi < batch; bi++) {
    const oa = offsetA + bi * strideA;
    const ob = offsetB + bi * strideB;
    const oc = offsetC + bi * strideC;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        const extra = Math.abs(args.bias?.[j] ?? 0) + (accumulate ? Math.abs(args.c?.[oc + i * n + j] ?? 0) : 0);
        let sum = 0;
        let bound = 0;
        for (let p0 = 0; p0 < k; p0 += 16) {
          const before = sum;
          let mag = 0;
          for (let p = p0; p < Math.min(p0 + 16, k); p++) {
            const t = a[oa + (transA ? p * m + i : i * k + p)] * b[ob + (transB ? j * k + p : p * n + j)];
            sum += t;
            mag += Math.abs(t);
          }
          bound += F16_STEP_ULPS * (Math.max(Math.abs(before), Math.abs(sum), mag) + extra);
        }
        bound += 2 ** -21 * (Math.abs(sum) + extra);
        tol[oc + i * n + j] = bound;
      }
    }
  }
  return tol;
}
