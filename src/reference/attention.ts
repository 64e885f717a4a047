// CPU reference of shaders/attention.wgsl: the full score matrix per head, softmax in
// float64, and the textbook backward (dV = P^T dO, dS = P * (dP - rowsum(dO * O)),
// dQ = scale dS K, dK = scale dS^T Q), same masking rules as the kernels; and of
// shaders/attention_tensor.wgsl, which rounds q, k, v and the unnormalised
// probabilities to f16, and shaders/attention_tensor_backward.wgsl, which rounds q, k,
// v, the scaled dO, P and the scaled dS.

import { productScale } from './grad_scale.ts';
import { roundArrayToF16, roundToF16 } from './matmul_f16.ts';

export interface AttentionRefDims {
  b: number;
  hq: number;
  hkv: number;
  tq: number;
  /** Key rows stored per head. */
  sCap: number;
  /** Visible key rows (defaults to sCap); query i sits at position s - tq + i. */
  s?: number;
  hd: number;
  scale?: number;
  causal?: boolean;
  padLeft?: ArrayLike<number>;
}

interface Resolved {
  s: number;
  scale: number;
  visible(b: number, i: number, j: number): boolean;
}

function resolve(d: AttentionRefDims): Resolved {
  const s = d.s ?? d.sCap;
  const causal = d.causal ?? true;
  const offset = s - d.tq;
  return {
    s,
    scale: d.scale ?? 1 / Math.sqrt(d.hd),
    visible(b, i, j) {
      const pad = Math.max(d.padLeft?.[b] ?? 0, 0);
      const pos = offset + i;
      return j >= pad && pos >= pad && (!causal || j <= pos);
    },
  };
}

// The unnormalised probabilities e = exp(score - row max) of one (batch row, query
// head) as [tq][s] (zero where a key is masked), each row's sum of them, and lse.
function exps(d: AttentionRefDims, r: Resolved, q: ArrayLike<number>, k: ArrayLike<number>, b: number, h: number) {
  const kh = Math.floor(h / (d.hq / d.hkv));
  const qb = (b * d.hq + h) * d.tq * d.hd;
  const kb = (b * d.hkv + kh) * d.sCap * d.hd;
  const e: Float64Array[] = [];
  const sum = new Float64Array(d.tq);
  const lse = new Float64Array(d.tq);
  for (let i = 0; i < d.tq; i++) {
    const row = new Float64Array(r.s);
    let m = -Infinity;
    for (let j = 0; j < r.s; j++) {
      if (!r.visible(b, i, j)) continue;
      let dot = 0;
      for (let c = 0; c < d.hd; c++) dot += q[qb + i * d.hd + c] * k[kb + j * d.hd + c];
      row[j] = dot * r.scale;
      m = Math.max(m, row[j]);
    }
    for (let j = 0; j < r.s; j++) {
      row[j] = r.visible(b, i, j) ? Math.exp(row[j] - m) : 0;
      sum[i] += row[j];
    }
    lse[i] = sum[i] > 0 ? m + Math.log(sum[i]) : 0;
    e.push(row);
  }
  return { e, sum, lse, qb, kb };
}

// P of one (batch row, query head) as [tq][s] (zero rows where nothing is visible), and lse.
function probs(d: AttentionRefDims, r: Resolved, q: ArrayLike<number>, k: ArrayLike<number>, b: number, h: number) {
  const { e, sum, lse, qb, kb } = exps(d, r, q, k, b, h);
  const p = e.map((row, i) => row.map((x) => (sum[i] > 0 ? x / sum[i] : 0)));
  return { p, lse, qb, kb };
}

export function attentionForward(d: AttentionRefDims, q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>) {
  return forwardWith(d, q, k, v, (x) => x);
}

/**
 * The tensor-core forward: q, k and v rounded to f16 before the products, the
 * unnormalised probabilities exp(s - row max) rounded to f16 before they weight v,
 * the sum divided out after (by the exact sum); scores, softmax and sums otherwise
 * exact. The kernel subtracts a running max that may trail the row's by less than its
 * rescale threshold, which moves each rounding by at most one f16 step.
 */
export function attentionForwardF16(d: AttentionRefDims, q: Float32Array, k: Float32Array, v: Float32Array) {
  return forwardWith(d, roundArrayToF16(q), roundArrayToF16(k), roundArrayToF16(v), roundToF16);
}

/** o and lse with each unnormalised probability passed through `weight` before it weights v. */
function forwardWith(d: AttentionRefDims, q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, weight: (e: number) => number) {
  const r = resolve(d);
  const o = new Float32Array(d.b * d.hq * d.tq * d.hd);
  const lse = new Float32Array(d.b * d.hq * d.tq);
  for (let b = 0; b < d.b; b++) {
    for (let h = 0; h < d.hq; h++) {
      const { e, sum, lse: l, qb, kb } = exps(d, r, q, k, b, h);
      for (let i = 0; i < d.tq; i++) {
        lse[(b * d.hq + h) * d.tq + i] = l[i];
        if (sum[i] === 0) continue;
        const row = e[i].map(weight);
        for (let c = 0; c < d.hd; c++) {
          let acc = 0;
          for (let j = 0; j < r.s; j++) acc += row[j] * v[kb + j * d.hd + c];
          o[qb + i * d.hd + c] = acc / sum[i];
        }
      }
    }
  }
  return { o, lse };
}

export function attentionBackward(d: AttentionRefDims, q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, dO: ArrayLike<number>) {
  const r = resolve(d);
  const dq = new Float64Array(q.length);
  const dk = new Float64Array(k.length);
  const dv = new Float64Array(v.length);
  for (let b = 0; b < d.b; b++) {
    for (let h = 0; h < d.hq; h++) {
      const { p, qb, kb } = probs(d, r, q, k, b, h);
      for (let i = 0; i < d.tq; i++) {
        const dp = new Float64Array(r.s);
        let delta = 0;
        for (let j = 0; j < r.s; j++) {
          if (p[i][j] === 0) continue;
          for (let c = 0; c < d.hd; c++) dp[j] += dO[qb + i * d.hd + c] * v[kb + j * d.hd + c];
          delta += p[i][j] * dp[j];
        }
        for (let j = 0; j < r.s; j++) {
          const pij = p[i][j];
          if (pij === 0) continue;
          const ds = pij * (dp[j] - delta) * r.scale;
          for (let c = 0; c < d.hd; c++) {
            dv[kb + j * d.hd + c] += pij * dO[qb + i * d.hd + c];
            dq[qb + i * d.hd + c] += ds * k[kb + j * d.hd + c];
            dk[kb + j * d.hd + c] += ds * q[qb + i * d.hd + c];
          }
        }
      }
    }
  }
  return { dq: Float32Array.from(dq), dk: Float32Array.from(dk), dv: Float32Array.from(dv) };
}

/**
 * The tensor-core backward from the forward's `o` and `lse`: sigma, a power of two, from
 * dO and v (productScale over 2 HD terms); q, k, v and sigma dO rounded to f16; P =
 * exp(scale q k - lse) from the rounded q and k, rounded to f16 before it weights sigma
 * dO; sigma dS = P (sigma dP - sigma delta), delta = rowsum(dO * o), rounded to f16 before
 * it weights q and k; sums exact, the gradients times 1 / sigma.
 */
export function attentionBackwardF16(
  d: AttentionRefDims, q: Float32Array, k: Float32Array, v: Float32Array, dO: Float32Array, fwd: { o: ArrayLike<number>; lse: ArrayLike<number> },
) {
  const r = resolve(d);
  const [sigma, inv] = productScale(dO, v, 2 * d.hd);
  const qh = roundArrayToF16(q);
  const kh = roundArrayToF16(k);
  const vh = roundArrayToF16(v);
  const doh = roundArrayToF16(dO.map((x) => x * sigma));
  const dq = new Float64Array(q.length);
  const dk = new Float64Array(k.length);
  const dv = new Float64Array(v.length);
  for (let b = 0; b < d.b; b++) {
    for (let h = 0; h < d.hq; h++) {
      const kb = (b * d.hkv + Math.floor(h / (d.hq / d.hkv))) * d.sCap * d.hd;
      for (let i = 0; i < d.tq; i++) {
        const row = (b * d.hq + h) * d.tq + i;
        const qb = row * d.hd;
        let delta = 0;
        for (let c = 0; c < d.hd; c++) delta += dO[qb + c] * fwd.o[qb + c];
        const sdelta = Math.fround(Math.fround(delta) * sigma);
        for (let j = 0; j < r.s; j++) {
          if (!r.visible(b, i, j)) continue;
          let score = 0;
          let dp = 0;
          for (let c = 0; c < d.hd; c++) {
            score += qh[qb + c] * kh[kb + j * d.hd + c];
            dp += doh[qb + c] * vh[kb + j * d.hd + c];
          }
          const p = Math.exp(score * r.scale - fwd.lse[row]);
          const p16 = roundToF16(p);
          const ds16 = roundToF16(p * (dp - sdelta));
          for (let c = 0; c < d.hd; c++) {
            dv[kb + j * d.hd + c] += p16 * doh[qb + c];
            dk[kb + j * d.hd + c] += ds16 * qh[qb + c];
            dq[qb + c] += ds16 * kh[kb + j * d.hd + c];
          }
        }
      }
    }
  }
  return {
    dq: Float32Array.from(dq, (x) => x * r.scale * inv),
    dk: Float32Array.from(dk, (x) => x * r.scale * inv),
    dv: Float32Array.from(dv, (x) => x * inv),
  };
}
