// CPU references for the optimizer kernels: PyTorch's AdamW update and the global
// gradient norm, in f64.

export interface AdamWRefOptions {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 1-based count of steps taken, this one included. */
  step: number;
  gradScale?: number;
}

/** One torch.optim.AdamW step on one parameter, in place. */
export function adamwStep(param: Float64Array, grad: ArrayLike<number>, m: Float64Array, v: Float64Array, o: AdamWRefOptions): void {
  const scale = o.gradScale ?? 1;
  const stepSize = o.lr / (1 - o.beta1 ** o.step);
  const bc2Sqrt = Math.sqrt(1 - o.beta2 ** o.step);
  for (let i = 0; i < param.length; i++) {
    const g = grad[i] * scale;
    param[i] *= 1 - o.lr * o.weightDecay;
    m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
    param[i] -= (stepSize * m[i]) / (Math.sqrt(v[i]) / bc2Sqrt + o.eps);
  }
}

/** sqrt of the sum of squares of every gradient element. */
export function globalNorm(grads: readonly ArrayLike<number>[]): number {
  let s = 0;
  for (const g of grads) for (let i = 0; i < g.length; i++) s += g[i] * g[i];
  return Math.sqrt(s);
}
