// CPU references for the self-distillation terms of src/algos/distill_loss.ts and
// src/algos/methods/pcsd.ts, written from the formulas of docs/ALGORITHMS.md section 3 in f64:
// each returns the term's value, its gradient w.r.t. lθ (gates held constant, as sg()
// makes them) and the logged means.

import { ShapeError } from '../tensor/errors.ts';

type Arr = ArrayLike<number>;

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

function expectLengths(op: string, named: Record<string, Arr>): number {
  const entries = Object.entries(named);
  const n = entries[0][1].length;
  if (entries.some(([, a]) => a.length !== n)) {
    throw new ShapeError(`${op}: inputs differ in length (${entries.map(([k, a]) => `${k} [${a.length}]`).join(', ')})`);
  }
  return n;
}

export interface GatedRef {
  value: number;
  /** d value / d lθ per token. */
  grad: Float64Array;
  gate: Float64Array;
  gateMean: number;
}

export interface SdarRef extends GatedRef {
  gateShare: number;
  gap: number;
}

/** mean_t[g·(lT − lθ)] for a constant gate g. */
function gatedRef(lp: Arr, lt: Arr, w: Arr, gate: Float64Array): GatedRef {
  const grad = new Float64Array(lp.length);
  let value = 0;
  let gateMean = 0;
  for (let i = 0; i < lp.length; i++) {
    value += w[i] * gate[i] * (lt[i] - lp[i]);
    grad[i] = -gate[i] * w[i];
    gateMean += w[i] * gate[i];
  }
  return { value, grad, gate, gateMean };
}

/** SDAR: g = σ(β·(lT − lθ)). */
export function sdarTermRef(lp: Arr, lt: Arr, w: Arr, beta: number): SdarRef {
  const n = expectLengths('sdarTermRef', { logprobs: lp, teacherLogprobs: lt, weights: w });
  const gate = new Float64Array(n);
  let gateShare = 0;
  let gap = 0;
  for (let i = 0; i < n; i++) {
    gate[i] = sigmoid(beta * (lt[i] - lp[i]));
    if (gate[i] > 0.5) gateShare += w[i];
    gap += w[i] * (lt[i] - lp[i]);
  }
  return { ...gatedRef(lp, lt, w, gate), gateShare, gap };
}

export interface SkillSdRef {
  value: number;
  grad: Float64Array;
  k3Mean: number;
  ratioMean: number;
}

/**
 * Skill-SD: mean_t[ρ·k3], e = lθ − lT, k3 = exp(min(−e, gapCap)) − 1 + e,
 * ρ = exp(min(lθ − lold, ratioCap)). A capped exponent passes no gradient.
 */
export function skillSdTermRef(lp: Arr, lt: Arr, lold: Arr, w: Arr, cfg: { ratioCap: number; gapCap: number }): SkillSdRef {
  const n = expectLengths('skillSdTermRef', { logprobs: lp, teacherLogprobs: lt, oldLogprobs: lold, weights: w });
  const grad = new Float64Array(n);
  let value = 0;
  let k3Mean = 0;
  let ratioMean = 0;
  for (let i = 0; i < n; i++) {
    const e = lp[i] - lt[i];
    const q = Math.exp(Math.min(-e, cfg.gapCap));
    const k3 = q - 1 + e;
    const dk3 = 1 - (-e <= cfg.gapCap ? q : 0);
    const rho = Math.exp(Math.min(lp[i] - lold[i], cfg.ratioCap));
    const drho = lp[i] - lold[i] <= cfg.ratioCap ? rho : 0;
    value += w[i] * rho * k3;
    grad[i] = w[i] * (drho * k3 + rho * dk3);
    k3Mean += w[i] * k3;
    ratioMean += w[i] * rho;
  }
  return { value, grad, k3Mean, ratioMean };
}

export interface PcsdRef extends GatedRef {
  /** S_t per token (0 outside the segments). */
  running: Float64Array;
  trend: Float64Array;
}

/**
 * PCSD (this project's reading of a paper abstract): per segment, S_t as the explicit
 * decayed sum Σ_{j≤t} decay^{t−j}·Δ_j, trend_t = (S_t − S_{t−W})/W with S before the
 * segment 0, w = σ(β·(S + γ·trend)); then the gated term with w.
 */
export function pcsdTermRef(
  lp: Arr, lt: Arr, w: Arr,
  segments: readonly { start: number; length: number }[],
  cfg: { beta: number; gamma: number; decay: number; trendWindow: number },
): PcsdRef {
  const n = expectLengths('pcsdTermRef', { logprobs: lp, teacherLogprobs: lt, weights: w });
  const running = new Float64Array(n);
  const trend = new Float64Array(n);
  const gate = new Float64Array(n);
  const W = cfg.trendWindow;
  for (const { start, length } of segments) {
    const sAt = (i: number) => {
      let s = 0;
      for (let j = 0; j <= i; j++) s += cfg.decay ** (i - j) * (lt[start + j] - lp[start + j]);
      return s;
    };
    for (let i = 0; i < length; i++) {
      const s = sAt(i);
      running[start + i] = s;
      trend[start + i] = (s - (i - W >= 0 ? sAt(i - W) : 0)) / W;
      gate[start + i] = sigmoid(cfg.beta * (s + cfg.gamma * trend[start + i]));
    }
  }
  return { ...gatedRef(lp, lt, w, gate), running, trend };
}
