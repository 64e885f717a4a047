// CPU reference of shaders/rope.wgsl. The angle is formed exactly as Hugging Face forms
// it (f32 inverse frequency times the f32 position, rounded to f32); cos, sin and the
// rotation are then evaluated in float64.

import { rmsNormForward } from './rmsnorm.ts';

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

export interface QkvCacheRef {
  /** [B*T, (hq + 2 hkv) * hd]: q heads, k heads, v heads per row. */
  qkv: Float32Array;
  positions: ArrayLike<number>;
  b: number;
  t: number;
  hq: number;
  hkv: number;
  hd: number;
  theta: number;
  rotaryDim?: number;
  /** Caches [B, hkv, capacity, hd] before the step (copied, not changed). */
  keys: Float32Array;
  values: Float32Array;
  capacity: number;
  offset: number;
  qkNorm?: { q: Float32Array; k: Float32Array; eps: number };
}

/**
 * CPU reference of `qkv_cache` (shaders/rope.wgsl): the op-by-op decode layer's q/k-norm
 * (rmsNormForward), rope and cache writes. Returns q [B, hq, T, hd] and the caches after.
 */
export function qkvCache(r: QkvCacheRef): { q: Float32Array; keys: Float32Array; values: Float32Array } {
  const { b, t, hq, hkv, hd, capacity, offset } = r;
  const width = (hq + 2 * hkv) * hd;
  // Heads [B, H, T, hd] of the projection starting at head `first`.
  const heads = (first: number, n: number) => {
    const out = new Float32Array(b * n * t * hd);
    for (let bi = 0; bi < b; bi++) {
      for (let h = 0; h < n; h++) {
        for (let ti = 0; ti < t; ti++) {
          const src = (bi * t + ti) * width + (first + h) * hd;
          out.set(r.qkv.subarray(src, src + hd), ((bi * n + h) * t + ti) * hd);
        }
      }
    }
    return out;
  };
  const rotate = (x: Float32Array, n: number, w: Float32Array | undefined) =>
    rope(w && r.qkNorm ? rmsNormForward(x, w, r.qkNorm.eps) : x, [b, n, t, hd], r.positions, r.theta, r.rotaryDim ?? hd);
  const q = rotate(heads(0, hq), hq, r.qkNorm?.q);
  const k = rotate(heads(hq, hkv), hkv, r.qkNorm?.k);
  const v = heads(hq + hkv, hkv);
  const keys = Float32Array.from(r.keys);
  const values = Float32Array.from(r.values);
  for (let bi = 0; bi < b; bi++) {
    for (let h = 0; h < hkv; h++) {
      for (let ti = 0; ti < t; ti++) {
        const from = ((bi * hkv + h) * t + ti) * hd;
        const to = ((bi * hkv + h) * capacity + offset + ti) * hd;
        keys.set(k.subarray(from, from + hd), to);
        values.set(v.subarray(from, from + hd), to);
      }
    }
  }
  return { q, keys, values };
}
