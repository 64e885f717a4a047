// CPU references for the causal depthwise conv1d of Qwen3.5's linear-attention layers
// (f64 math), in the channels-last layout the projections produce:
//   y[b, t, c] = act(sum_j w[c, j] * xe[b, t - (K-1) + j, c])
// where xe is x with left-padding positions zeroed, and times before the first new
// token come from a conv state [B, K-1, C] (zeros when there is none).

export interface Conv1dDims {
  b: number;
  t: number;
  c: number;
  k: number;
}

export interface Conv1dOptions {
  silu?: boolean;
  /** Leading padding positions per batch row (absolute positions, see `offset`). */
  padLeft?: Int32Array;
  /** Absolute position of the first new token (tokens already in the state). */
  offset?: number;
  /** The last K-1 inputs before the new tokens, [B, K-1, C]. */
  state?: Float32Array;
}

const sig = (x: number) => 1 / (1 + Math.exp(-x));

function inputAt(x: Float32Array, d: Conv1dDims, o: Conv1dOptions, b: number, s: number, c: number): number {
  const { t: T, c: C, k: K } = d;
  if (s < 0) return o.state ? o.state[(b * (K - 1) + (K - 1 + s)) * C + c] : 0;
  if ((o.offset ?? 0) + s < (o.padLeft?.[b] ?? 0)) return 0;
  return x[(b * T + s) * C + c];
}

function preActivation(x: Float32Array, w: Float32Array, d: Conv1dDims, o: Conv1dOptions, b: number, t: number, c: number): number {
  let acc = 0;
  for (let j = 0; j < d.k; j++) acc += w[c * d.k + j] * inputAt(x, d, o, b, t - (d.k - 1) + j, c);
  return acc;
}

/** The output [B, T, C] and the state after the new tokens [B, K-1, C]. */
export function conv1dForward(x: Float32Array, w: Float32Array, d: Conv1dDims, o: Conv1dOptions = {}): { y: Float32Array; state: Float32Array } {
  const { b: B, t: T, c: C, k: K } = d;
  const y = new Float32Array(B * T * C);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let c = 0; c < C; c++) {
        const a = preActivation(x, w, d, o, b, t, c);
        y[(b * T + t) * C + c] = o.silu ? a * sig(a) : a;
      }
    }
  }
  const state = new Float32Array(B * (K - 1) * C);
  for (let b = 0; b < B; b++) {
    for (let j = 0; j < K - 1; j++) {
      for (let c = 0; c < C; c++) state[(b * (K - 1) + j) * C + c] = inputAt(x, d, o, b, T - (K - 1) + j, c);
    }
  }
  return { y, state };
}

/** Gradients of sum(y * dy) for x and w (no state: the training path). */
export function conv1dBackward(x: Float32Array, w: Float32Array, dy: Float32Array, d: Conv1dDims, o: Conv1dOptions = {}): { dx: Float32Array; dw: Float32Array } {
  const { b: B, t: T, c: C, k: K } = d;
  const dpre = new Float64Array(B * T * C);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let c = 0; c < C; c++) {
        const i = (b * T + t) * C + c;
        const a = preActivation(x, w, d, o, b, t, c);
        const s = sig(a);
        dpre[i] = dy[i] * (o.silu ? s * (1 + a * (1 - s)) : 1);
      }
    }
  }
  const dx = new Float32Array(B * T * C);
  const dw = new Float64Array(C * K);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      for (let c = 0; c < C; c++) {
        for (let j = 0; j < K; j++) {
          const s = t - (K - 1) + j;
          dw[c * K + j] += dpre[(b * T + t) * C + c] * inputAt(x, d, o, b, s, c);
        }
        if ((o.offset ?? 0) + t < (o.padLeft?.[b] ?? 0)) continue;
        let acc = 0;
        for (let j = 0; j < K; j++) {
          const out = t + (K - 1) - j;
          if (out < T) acc += w[c * K + j] * dpre[(b * T + out) * C + c];
        }
        dx[(b * T + t) * C + c] = acc;
      }
    }
  }
  return { dx, dw: Float32Array.from(dw) };
}
