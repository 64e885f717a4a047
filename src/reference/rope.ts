// CPU reference of shaders/rope.wgsl. The angle is formed exactly as Hugging Face forms
// it (f32 inverse frequency times the f32 position, rounded to f32); cos, sin and the
// rotation are then evaluated in float64.

/**
 * Hugging Face's inverse frequencies, `1.0 / (base ** (arange(0, dim, 2).float() / dim))`
 * in float32: exponent, power and reciprocal each rounded to f32.
 */
export function invFreq(theta: number, rotaryDim: number): Float32Array {
  const out = new Float32Array(rotaryDim / 2);
  for (let i = 0; i < out.length; i++) {
    const power = Math.fround(Math.pow(theta, Math.fround((2 * i) / rotaryDim)));
    out[i] = 1 / power;
  }
  return out;
}

/** x [B, H, T, D], positions [B, T]; `inverse` rotates by the negative angles. */
export function rope(
  x: ArrayLike<number>, shape: readonly [number, number, number, number], positions: ArrayLike<number>,
  theta: number, rotaryDim = shape[3], inverse = false,
): Float32Array {
  const [b, h, t, hd] = shape;
  const half = rotaryDim / 2;
  const freq = invFreq(theta, rotaryDim);
  const y = Float32Array.from(x);
  for (let bi = 0; bi < b; bi++) {
    for (let hi = 0; hi < h; hi++) {
      for (let ti = 0; ti < t; ti++) {
        const base = ((bi * h + hi) * t + ti) * hd;
        const pos = positions[bi * t + ti];
        for (let i = 0; i < half; i++) {
          const a = Math.fround(pos * freq[i]);
          const c = Math.cos(a);
          const s = inverse ? -Math.sin(a) : Math.sin(a);
          const x1 = x[base + i];
          const x2 = x[base + i + half];
          y[base + i] = x1 * c - x2 * s;
          y[base + i + half] = x2 * c + x1 * s;
        }
      }
    }
  }
  return y;
}
