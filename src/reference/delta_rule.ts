// CPU references for the gated delta rule (Gated DeltaNet), the plain token-by-token
// recurrence in f64. Per batch row b and value head h, with its key head
// h / (Hv / Hk) and a state S [Dk, Dv]:
//   S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T (scale q_t)
// Layouts: q, k [B, T, Hk, Dk]; v, out [B, T, Hv, Dv]; g, beta [B, T, Hv];
// state [B, Hv, Dk, Dv]. Left-padding positions (absolute position < padLeft[b]) leave
// the state untouched and output zeros.

export interface DeltaRuleDims {
  b: number;
  t: number;
  hk: number;
  hv: number;
  dk: number;
  dv: number;
}

export interface DeltaRuleOptions {
  scale?: number;
  padLeft?: Int32Array;
  /** Absolute position of the first token (tokens already folded into `state`). */
  offset?: number;
  /** Initial state [B, Hv, Dk, Dv]; zeros when absent. */
  state?: Float32Array;
}

export interface DeltaRuleInputs {
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  g: Float32Array;
  beta: Float32Array;
}

function isPad(d: DeltaRuleDims, o: DeltaRuleOptions, b: number, t: number): boolean {
  return (o.offset ?? 0) + t < (o.padLeft?.[b] ?? 0);
}

interface Walk {
  /** States after each step [T][Dk * Dv] (the state before step 0 is `initial`). */
  after: Float64Array[];
  initial: Float64Array;
}

function walk(x: DeltaRuleInputs, d: DeltaRuleDims, o: DeltaRuleOptions, b: number, h: number, out: Float32Array | null): Walk {
  const { t: T, hk: Hk, hv: Hv, dk: Dk, dv: Dv } = d;
  const scale = o.scale ?? 1 / Math.sqrt(Dk);
  const kh = Math.floor(h / (Hv / Hk));
  const initial = new Float64Array(Dk * Dv);
  if (o.state) for (let i = 0; i < Dk * Dv; i++) initial[i] = o.state[(b * Hv + h) * Dk * Dv + i];
  let S = initial;
  const after: Float64Array[] = [];
  for (let t = 0; t < T; t++) {
    if (isPad(d, o, b, t)) {
      after.push(S);
      continue;
    }
    const qo = ((b * T + t) * Hk + kh) * Dk;
    const vo = ((b * T + t) * Hv + h) * Dv;
    const gt = x.g[(b * T + t) * Hv + h];
    const bt = x.beta[(b * T + t) * Hv + h];
    const decay = Math.exp(gt);
    const next = new Float64Array(Dk * Dv);
    for (let i = 0; i < Dk * Dv; i++) next[i] = S[i] * decay;
    for (let j = 0; j < Dv; j++) {
      let kv = 0;
      for (let i = 0; i < Dk; i++) kv += next[i * Dv + j] * x.k[qo + i];
      const delta = bt * (x.v[vo + j] - kv);
      for (let i = 0; i < Dk; i++) next[i * Dv + j] += x.k[qo + i] * delta;
      if (out) {
        let acc = 0;
        for (let i = 0; i < Dk; i++) acc += next[i * Dv + j] * x.q[qo + i] * scale;
        out[vo + j] = acc;
      }
    }
    S = next;
    after.push(S);
  }
  return { after, initial };
}

/** The output [B, T, Hv, Dv] and the final state [B, Hv, Dk, Dv]. */
export function deltaRuleForward(x: DeltaRuleInputs, d: DeltaRuleDims, o: DeltaRuleOptions = {}): { out: Float32Array; state: Float32Array } {
  const { b: B, t: T, hv: Hv, dk: Dk, dv: Dv } = d;
  const out = new Float32Array(B * T * Hv * Dv);
  const state = new Float32Array(B * Hv * Dk * Dv);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hv; h++) {
      const w = walk(x, d, o, b, h, out);
      state.set(T ? w.after[T - 1] : w.initial, (b * Hv + h) * Dk * Dv);
    }
  }
  return { out, state };
}

/** Gradients of sum(out * dOut) for every input, by back-propagation through the recurrence. */
export function deltaRuleBackward(x: DeltaRuleInputs, d: DeltaRuleDims, dOut: Float32Array, o: DeltaRuleOptions = {}): DeltaRuleInputs {
  const { b: B, t: T, hk: Hk, hv: Hv, dk: Dk, dv: Dv } = d;
  const scale = o.scale ?? 1 / Math.sqrt(Dk);
  const dq = new Float64Array(x.q.length);
  const dk = new Float64Array(x.k.length);
  const dv = new Float32Array(x.v.length);
  const dg = new Float32Array(x.g.length);
  const dbeta = new Float32Array(x.beta.length);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hv; h++) {
      const kh = Math.floor(h / (Hv / Hk));
      const w = walk(x, d, o, b, h, null);
      const dS = new Float64Array(Dk * Dv);
      for (let t = T - 1; t >= 0; t--) {
        if (isPad(d, o, b, t)) continue;
        const prev = t ? w.after[t - 1] : w.initial;
        const S = w.after[t];
        const qo = ((b * T + t) * Hk + kh) * Dk;
        const vo = ((b * T + t) * Hv + h) * Dv;
        const go = (b * T + t) * Hv + h;
        const decay = Math.exp(x.g[go]);
        const bt = x.beta[go];
        // o = S^T (scale q)
        for (let i = 0; i < Dk; i++) {
          let acc = 0;
          for (let j = 0; j < Dv; j++) {
            acc += S[i * Dv + j] * dOut[vo + j];
            dS[i * Dv + j] += x.q[qo + i] * scale * dOut[vo + j];
          }
          dq[qo + i] += acc * scale;
        }
        // S = D + k delta^T with D = decay * prev, delta = beta (v - D^T k)
        let dgAcc = 0;
        for (let j = 0; j < Dv; j++) {
          let kv = 0;
          let dDelta = 0;
          for (let i = 0; i < Dk; i++) {
            kv += decay * prev[i * Dv + j] * x.k[qo + i];
            dDelta += dS[i * Dv + j] * x.k[qo + i];
          }
          const delta = bt * (x.v[vo + j] - kv);
          dv[vo + j] = bt * dDelta;
          dbeta[go] += (x.v[vo + j] - kv) * dDelta;
          const dkv = -bt * dDelta;
          for (let i = 0; i < Dk; i++) {
            dk[qo + i] += dS[i * Dv + j] * delta + decay * prev[i * Dv + j] * dkv;
            const dD = dS[i * Dv + j] + x.k[qo + i] * dkv;
            dgAcc += decay * prev[i * Dv + j] * dD;
            dS[i * Dv + j] = decay * dD;
          }
        }
        dg[go] = dgAcc;
      }
    }
  }
  return { q: Float32Array.from(dq), k: Float32Array.from(dk), v: dv, g: dg, beta: dbeta };
}

const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));

/** g = -exp(aLog[h]) softplus(a + dtBias[h]) for a [rows, H]. */
export function deltaDecayForward(a: Float32Array, aLog: Float32Array, dtBias: Float32Array): Float32Array {
  const h = aLog.length;
  return a.map((x, i) => -Math.exp(aLog[i % h]) * softplus(x + dtBias[i % h]));
}

/** Gradients of sum(g * dg) for a, aLog and dtBias. */
export function deltaDecayBackward(a: Float32Array, aLog: Float32Array, dtBias: Float32Array, dg: Float32Array): { a: Float32Array; aLog: Float32Array; dtBias: Float32Array } {
  const h = aLog.length;
  const da = new Float32Array(a.length);
  const daLog = new Float64Array(h);
  const dDt = new Float64Array(h);
  for (let i = 0; i < a.length; i++) {
    const x = a[i] + dtBias[i % h];
    const amp = Math.exp(aLog[i % h]);
    const d = -dg[i] * amp / (1 + Math.exp(-x));
    da[i] = d;
    dDt[i % h] += d;
    daLog[i % h] += -dg[i] * amp * softplus(x);
  }
  return { a: da, aLog: Float32Array.from(daLog), dtBias: Float32Array.from(dDt) };
}
