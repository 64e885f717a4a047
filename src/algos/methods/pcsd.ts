// PCSD (persistent-consistency self-distillation). Only the paper's abstract is public:
// this is this project's reading of it (docs/ALGORITHMS.md section 3), not a reproduction.
// SDAR's per-token gate is replaced by one that looks at how the teacher-student gap
// Δ = lT − lθ has behaved so far in the response:
//   S_t = decay·S_{t−1} + Δ_t (S_{-1} = 0, restarting at each response)
//   trend_t = (S_t − S_{t−W}) / W, with S before the response's first token taken as 0
//   w_t = sg(σ(β·(S_t + γ·trend_t)))
//   term = mean_t[w·(lT − lθ)]
// The gate is a causal scan along each response, so it is built on the CPU from Δ read
// back without gradient, then uploaded as a constant for the GPU term.

import { z } from 'zod';
import { ShapeError } from '../../tensor/errors.ts';
import { scale, sub } from '../../tensor/ops/index.ts';
import { tensor, type Tensor } from '../../tensor/tensor.ts';
import { gatedTerm, type DistillInputs, type GatedTerms } from '../distill_loss.ts';
import { defineMethod } from '../method.ts';
import { nonNegNum, posInt, prob } from '../options.ts';
import { grpoPlan } from '../plan.ts';

const options = z.strictObject({
  beta: nonNegNum.default(5),
  /** Weight of the trend in the gate. */
  gamma: nonNegNum.default(1),
  /** Decay of the causal running sum of Δ. */
  decay: prob.default(0.9),
  /** Tokens over which the trend (slope of S) is measured. */
  trendWindow: posInt.default(4),
  coef: nonNegNum.default(0.01),
});

export interface PcsdGateConfig {
  beta: number;
  /** Weight of the trend in the gate. */
  gamma: number;
  /** Decay of the causal running sum of Δ. */
  decay: number;
  /** W: tokens over which the trend (slope of S) is measured. */
  trendWindow: number;
}

/** One response's tokens in the packed [N] array. */
export interface TokenSegment {
  start: number;
  length: number;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

/** w_t per token of the packed array; positions outside every segment get 0. */
export function pcsdGate(delta: Float32Array, segments: readonly TokenSegment[], cfg: PcsdGateConfig): Float32Array {
  const W = cfg.trendWindow;
  if (!Number.isInteger(W) || W < 1) throw new RangeError(`pcsdGate: trendWindow must be a positive integer, got ${W}`);
  const gate = new Float32Array(delta.length);
  const s = new Float64Array(delta.length);
  for (const { start, length } of segments) {
    if (!Number.isInteger(start) || !Number.isInteger(length) || start < 0 || length < 0 || start + length > delta.length) {
      throw new ShapeError(`pcsdGate: segment [${start}, ${start + length}) lies outside the packed array of ${delta.length} tokens`);
    }
    let prev = 0;
    for (let i = 0; i < length; i++) {
      const t = start + i;
      prev = cfg.decay * prev + delta[t];
      s[t] = prev;
      const trend = (prev - (i >= W ? s[t - W] : 0)) / W;
      gate[t] = sigmoid(cfg.beta * (prev + cfg.gamma * trend));
    }
  }
  return gate;
}

/** mean_t[w·(lT − lθ)] with the gate from pcsdGate (a constant: d/dlθ = −w·weight). */
export function pcsdTerm(t: DistillInputs, gate: Tensor): GatedTerms {
  return gatedTerm(t, gate, 'pcsdTerm');
}

export const pcsd = defineMethod({
  name: 'pcsd',
  summary: 'the SDAR term with a persistence gate over the response (this project\'s reading of the paper)',
  options,
  interpreted: 'PCSD is this project\'s reading of the paper\'s abstract (no public code): gate σ(β·(S + γ·trend)) over a decayed causal sum S of the teacher gap',
  loop: 'rl',
  plan: ({ options: o, entropyCoef }) => ({
    ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true,
    // The gate is a stop-gradient scan along each response of Δ = lT − lθ, built on the CPU from lθ's current values.
    aux: async (x) => {
      const delta = Float32Array.from(await sub(x.teacherLogprobs, x.logprobs).toArray());
      const r = pcsdTerm(x, tensor(pcsdGate(delta, x.segments, o)));
      return { loss: scale(r.term, o.coef), stats: { 'pcsd/gate_mean': r.gateMean } };
    },
  }),
});
