// CPU references for shaders/logprob.wgsl and the ops built on it (f64 math over whole
// rows; the GPU's chunking must not change the result).

export interface LogprobRef {
  logprobs: Float64Array;
  entropy: Float64Array;
}

/** Log-probs of `targets` and entropies under softmax(logits / T), logits [n, vocab]. */
export function tokenLogprobs(logits: ArrayLike<number>, targets: ArrayLike<number>, n: number, vocab: number, temperature = 1): LogprobRef {
  const logprobs = new Float64Array(n);
  const entropy = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    const z = rowScaled(logits, r, vocab, temperature);
    const lse = logSumExp(z);
    let meanZ = 0;
    for (const v of z) meanZ += Math.exp(v - lse) * v;
    logprobs[r] = z[targets[r]] - lse;
    entropy[r] = lse - meanZ;
  }
  return { logprobs, entropy };
}

/**
 * d loss / d logits for loss = sum(gLp * logprobs) + sum(gEnt * entropy), from the
 * definitions: d lp / d z_j = 1[j = t] - p_j, d H / d z_j = -p_j (z_j - E_p[z]), and
 * d z / d logits = 1 / T.
 */
export function tokenLogprobsGrad(
  logits: ArrayLike<number>, targets: ArrayLike<number>, n: number, vocab: number,
  gLp: ArrayLike<number>, gEnt: ArrayLike<number> | null, temperature = 1,
): Float64Array {
  const out = new Float64Array(n * vocab);
  for (let r = 0; r < n; r++) {
    const z = rowScaled(logits, r, vocab, temperature);
    const lse = logSumExp(z);
    let meanZ = 0;
    for (const v of z) meanZ += Math.exp(v - lse) * v;
    for (let j = 0; j < vocab; j++) {
      const pj = Math.exp(z[j] - lse);
      let d = gLp[r] * ((j === targets[r] ? 1 : 0) - pj);
      if (gEnt) d -= gEnt[r] * pj * (z[j] - meanZ);
      out[r * vocab + j] = d / temperature;
    }
  }
  return out;
}

/** hidden [n, h] @ weight[vocab, h]^T: the LM head's logits. */
export function lmHeadLogits(hidden: ArrayLike<number>, weight: ArrayLike<number>, n: number, h: number, vocab: number): Float64Array {
  const out = new Float64Array(n * vocab);
  for (let r = 0; r < n; r++) {
    for (let v = 0; v < vocab; v++) {
      let s = 0;
      for (let k = 0; k < h; k++) s += hidden[r * h + k] * weight[v * h + k];
      out[r * vocab + v] = s;
    }
  }
  return out;
}

/** Gradients of hidden [n, h] and weight [vocab, h] from the logits' gradient [n, vocab]. */
export function lmHeadGrads(
  dlogits: ArrayLike<number>, hidden: ArrayLike<number>, weight: ArrayLike<number>, n: number, h: number, vocab: number,
): { dHidden: Float64Array; dWeight: Float64Array } {
  const dHidden = new Float64Array(n * h);
  const dWeight = new Float64Array(vocab * h);
  for (let r = 0; r < n; r++) {
    for (let v = 0; v < vocab; v++) {
      const d = dlogits[r * vocab + v];
      for (let k = 0; k < h; k++) {
        dHidden[r * h + k] += d * weight[v * h + k];
        dWeight[v * h + k] += d * hidden[r * h + k];
      }
    }
  }
  return { dHidden, dWeight };
}

function rowScaled(logits: ArrayLike<number>, r: number, vocab: number, temperature: number): number[] {
  const z = new Array<number>(vocab);
  for (let j = 0; j < vocab; j++) z[j] = logits[r * vocab + j] / temperature;
  return z;
}

function logSumExp(z: readonly number[]): number {
  let m = -Infinity;
  for (const v of z) m = Math.max(m, v);
  let s = 0;
  for (const v of z) s += Math.exp(v - m);
  return m + Math.log(s);
}
