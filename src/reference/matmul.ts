// CPU reference for the f32 kernels of shaders/matmul/: plain loops, f64 accumulation.

export type ActName = 'none' | 'silu' | 'gelu' | 'relu';

export const actRef: Record<ActName, (x: number) => number> = {
  none: (x) => x,
  silu: (x) => x / (1 + Math.exp(-x)),
  gelu: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))),
  relu: (x) => Math.max(x, 0),
};

export interface MatmulRefArgs {
  a: Float32Array;
  b: Float32Array;
  bias?: Float32Array;
  /** Initial output (added to when accumulating); zeros otherwise. */
  c?: Float32Array;
  m: number;
  n: number;
  k: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  strideA?: number;
  strideB?: number;
  strideC?: number;
  offsetA?: number;
  offsetB?: number;
  offsetC?: number;
  act?: ActName;
  accumulate?: boolean;
}

/** C[b] = act(op(A[b]) @ op(B[b]) + bias), or C[b] += that, with the kernel's layouts. */
export function matmul(args: MatmulRefArgs): Float32Array {
  const { a, b, bias, m, n, k, batch = 1, transA = false, transB = false, act = 'none', accumulate = false } = args;
  const strideA = args.strideA ?? m * k;
  const strideB = args.strideB ?? k * n;
  const strideC = args.strideC ?? m * n;
  const { offsetA = 0, offsetB = 0, offsetC = 0 } = args;
  const size = batch === 0 ? 0 : offsetC + (batch - 1) * strideC + m * n;
  const c = args.c ? Float32Array.from(args.c) : new Float32Array(size);
  const f = actRef[act];
  for (let bi = 0; bi < batch; bi++) {
    const oa = offsetA + bi * strideA;
    const ob = offsetB + bi * strideB;
    const oc = offsetC + bi * strideC;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) {
          const x = a[oa + (transA ? p * m + i : i * k + p)];
          const y = b[ob + (transB ? j * k + p : p * n + j)];
          s += x * y;
        }
        if (bias) s += bias[j];
        const v = f(s);
        c[oc + i * n + j] = accumulate ? c[oc + i * n + j] + v : v;
      }
    }
  }
  return c;
}
