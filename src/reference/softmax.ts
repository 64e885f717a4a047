// CPU references for shaders/softmax.wgsl (f64 math, rows of the last axis).

function logSumExp(x: ArrayLike<number>, base: number, n: number): number {
  let m = -Infinity;
  for (let i = 0; i < n; i++) m = Math.max(m, x[base + i]);
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.exp(x[base + i] - m);
  return m + Math.log(s);
}

/** Softmax (or log-softmax with `log`) of each row of length n. */
export function softmax(x: Float32Array, n: number, log = false): Float32Array {
  const out = new Float32Array(x.length);
  for (let base = 0; base < x.length; base += n) {
    const lse = logSumExp(x, base, n);
    for (let i = 0; i < n; i++) out[base + i] = log ? x[base + i] - lse : Math.exp(x[base + i] - lse);
  }
  return out;
}

/** The input gradient of softmax / log-softmax given its output y and output gradient g. */
export function softmaxBackward(y: Float32Array, g: Float32Array, n: number, log = false): Float32Array {
  const out = new Float32Array(y.length);
  for (let base = 0; base < y.length; base += n) {
    let acc = 0;
    for (let i = 0; i < n; i++) acc += log ? g[base + i] : g[base + i] * y[base + i];
    for (let i = 0; i < n; i++) {
      out[base + i] = log ? g[base + i] - Math.exp(y[base + i]) * acc : y[base + i] * (g[base + i] - acc);
    }
  }
  return out;
}
