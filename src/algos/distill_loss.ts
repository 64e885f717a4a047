// Auxiliary self-distillation losses on the sampled tokens (docs/ALGORITHMS.md
// section 3), as GPU tensor expressions over the packed response tokens [N]:
//   SDAR:      Δ = lT − sg(lθ); g = sg(σ(β·Δ)); term = mean_t[g·(lT − lθ)]
//              (OPSD is the same term with the policy gradient off; GRPO+OPSD is β = 0,
//              a constant gate 0.5)
//   Skill-SD:  e = lθ − lT; k3 = exp(min(−e, gapCap)) − 1 + e;
//              ρ = exp(min(lθ − lold, ratioCap)); term = mean_t[ρ·k3], gradient through both
// The caller scales `term` by the method's coefficient. mean_t uses the micro-batch's
// token weights (1/count on valid tokens, 0 elsewhere), as in policy_loss.ts.

import { noGrad } from '../tensor/autograd.ts';
import { ShapeError } from '../tensor/errors.ts';
import { add, affine, clamp, exp, mul, sigmoid, scale, sub } from '../tensor/ops/index.ts';
import { fmt, sameShape } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { tokenMean } from './policy_loss.ts';

export interface DistillInputs {
  /** lθ [N], differentiable. */
  logprobs: Tensor;
  /** lT [N]. */
  teacherLogprobs: Tensor;
  /** lold [N]. */
  oldLogprobs: Tensor;
  /** 1/count on valid tokens, 0 elsewhere [N]. */
  weights: Tensor;
}

export interface GatedTerms {
  /** mean_t[g·(lT − lθ)]; d/dlθ = −g·weight per token. */
  term: Tensor;
  gateMean: Tensor;
}

export interface SdarTerms extends GatedTerms {
  /** Share of valid tokens with g > 0.5. */
  gateShare: Tensor;
  /** mean_t(lT − lθ). */
  gap: Tensor;
}

export interface SkillSdConfig {
  /** ρ = exp(min(lθ − lold, ratioCap)). */
  ratioCap: number;
  /** exp(min(−e, gapCap)) inside k3. */
  gapCap: number;
}

export interface SkillSdTerms {
  term: Tensor;
  k3Mean: Tensor;
  ratioMean: Tensor;
}

/** Lowest finite f32: a one-sided clamp that never binds from below. */
const F32_LOWEST = -3.4028234663852886e38;

/** Throws ShapeError unless every given tensor has the shape of the first. */
export function expectSameShapes(op: string, named: Record<string, Tensor>): void {
  const entries = Object.entries(named);
  const [, first] = entries[0];
  if (entries.every(([, t]) => sameShape(t.shape, first.shape))) return;
  throw new ShapeError(`${op}: inputs differ in shape (${entries.map(([k, t]) => `${k} ${fmt(t.shape)}`).join(', ')})`);
}

function expectDistillInputs(op: string, t: DistillInputs): void {
  expectSameShapes(op, { logprobs: t.logprobs, teacherLogprobs: t.teacherLogprobs, oldLogprobs: t.oldLogprobs, weights: t.weights });
}

/** g = sg(σ(β·(lT − lθ))) per token, carrying no gradient. */
export function sdarGate(t: DistillInputs, beta: number): Tensor {
  return noGrad(() => sigmoid(scale(sub(t.teacherLogprobs, t.logprobs), beta)));
}

/** mean_t[gate·(lT − lθ)] with a gate that carries no gradient (SDAR's or PCSD's); `op` names the caller in errors. */
export function gatedTerm(t: DistillInputs, gate: Tensor, op = 'gatedTerm'): GatedTerms {
  expectDistillInputs(op, t);
  expectSameShapes(op, { logprobs: t.logprobs, gate });
  const term = tokenMean(mul(gate, sub(t.teacherLogprobs, t.logprobs)), t.weights);
  const gateMean = noGrad(() => tokenMean(gate, t.weights));
  return { term, gateMean };
}

export function sdarTerm(t: DistillInputs, beta: number): SdarTerms {
  expectDistillInputs('sdarTerm', t);
  const g = sdarGate(t, beta);
  const { term, gateMean } = gatedTerm(t, g, 'sdarTerm');
  return noGrad(() => {
    // g is an f32 in [0, 1]; above 0.5 its spacing is 2^-24, so g·2^24 − 2^23 is an
    // exact integer ≥ 1 where g > 0.5 and ≤ 0 elsewhere: the clamp is the 0/1 indicator.
    const above = clamp(affine(g, 2 ** 24, -(2 ** 23)), 0, 1);
    const gateShare = tokenMean(above, t.weights);
    const gap = tokenMean(sub(t.teacherLogprobs, t.logprobs), t.weights);
    return { term, gateMean, gateShare, gap };
  });
}

export function skillSdTerm(t: DistillInputs, cfg: SkillSdConfig): SkillSdTerms {
  expectDistillInputs('skillSdTerm', t);
  const e = sub(t.logprobs, t.teacherLogprobs);
  const k3 = add(affine(exp(clamp(scale(e, -1), F32_LOWEST, cfg.gapCap)), 1, -1), e);
  const ratio = exp(clamp(sub(t.logprobs, t.oldLogprobs), F32_LOWEST, cfg.ratioCap));
  const term = tokenMean(mul(ratio, k3), t.weights);
  return noGrad(() => ({ term, k3Mean: tokenMean(k3, t.weights), ratioMean: tokenMean(ratio, t.weights) }));
}
