// CPU references for RMSNorm over the last dim (f64 math).

export function rmsNormForward(x: Float32Array, w: Float32Array, eps: number): Float32Array {
  const h = w.length;
  const out = new Float32Array(x.length);
  for (let base = 0; base < x.length; base += h) {
    let ss = 0;
    for (let j = 0; j < h; j++) ss += x[base + j] * x[base + j];
    const r = 1 / Math.sqrt(ss / h + eps);
    for (let j = 0; j < h; j++) out[base + j] = x[base + j] * r * w[j];
  }
  return out;
}

export function rmsNormBackward(x: Float32Array, w: Float32Array, g: Float32Array, eps: number): { dx: Float32Array; dw: Float32Array } {
  const h = w.length;
  const dx = new Float32Array(x.length);
  const dw = new Float64Array(h);
  for (let base = 0; base < x.length; base += h) {
    let ss = 0;
    let dot = 0;
    for (let j = 0; j < h; j++) {
      ss += x[base + j] * x[base + j];
      dot += g[base + j] * w[j] * x[base + j];
    }
    const r = 1 / Math.sqrt(ss / h + eps);
    for (let j = 0; j < h; j++) {
      dx[base + j] = r * g[base + j] * w[j] - (x[base + j] * r * r * r * dot) / h;
      dw[j] += g[base + j] * x[base + j] * r;
    }
  }
  return { dx, dw: Float32Array.from(dw) };
}
