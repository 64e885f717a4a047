// CPU reference for shaders/reduce.wgsl: [outer, r, inner] reduced over r, f64 sums.

export type ReduceRefOp = 'sum' | 'mean' | 'max';

export function reduce(x: Float32Array, outer: number, r: number, inner: number, op: ReduceRefOp): Float32Array {
  const y = new Float32Array(outer * inner);
  for (let o = 0; o < outer; o++) {
    for (let c = 0; c < inner; c++) {
      let acc = op === 'max' ? -Infinity : 0;
      for (let i = 0; i < r; i++) {
        const v = x[(o * r + i) * inner + c];
        acc = op === 'max' ? Math.max(acc, v) : acc + v;
      }
      y[o * inner + c] = op === 'mean' ? acc / r : acc;
    }
  }
  return y;
}
