// RLSD (docs/ALGORITHMS.md section 3): no auxiliary loss; the teacher reweights the
// GRPO advantage per sampled token,
//   w = clip(exp(sign(A)·(lT − lold)), clipLow, clipHigh),  Â = A·[(1 − λ) + λ·w],
// so a positive advantage grows on tokens the teacher likes more than the rollout
// policy did and a negative one grows on tokens it likes less. λ decays linearly
// from lambdaStart to 0, after which RLSD is plain GRPO without a teacher pass.

import { z } from 'zod';
import type { StepSample } from '../../rollout/sample.ts';
import { defineMethod } from '../method.ts';
import { posInt, posNum, prob } from '../options.ts';
import { grpoPlan } from '../plan.ts';
import { checkTransformInputs, clip } from '../token_stats.ts';

const options = z.strictObject({
  lambdaStart: prob.default(0.5),
  decayIterations: posInt.default(100),
  clipLow: posNum.default(0.8),
  clipHigh: posNum.default(1.2),
}).refine((o) => o.clipLow <= o.clipHigh, { path: ['clipLow'], message: 'must not exceed clipHigh' });

export type RlsdConfig = z.output<typeof options>;

/**
 * λ of a 1-based iteration, as the reference trainer computes it from its step
 * counter: lambdaStart·(1 − iteration/decayIterations), 0 from iteration
 * decayIterations on.
 */
export function rlsdLambda(iteration: number, cfg: RlsdConfig): number {
  if (!Number.isInteger(iteration) || iteration < 1) throw new Error(`rlsdLambda: iteration must be an integer >= 1, got ${iteration}`);
  return iteration >= cfg.decayIterations ? 0 : cfg.lambdaStart * (1 - iteration / cfg.decayIterations);
}

export function rlsdAdvantages(
  samples: readonly Pick<StepSample, 'responseIds'>[],
  adv: Float64Array,
  teacher: readonly Float32Array[],
  old: readonly Float32Array[],
  lambda: number,
  cfg: RlsdConfig,
): { advantages: Float32Array[]; metrics: Record<string, number> } {
  checkTransformInputs('rlsdAdvantages', samples, adv, [
    { name: 'teacher log-probs', arrays: teacher },
    { name: 'old log-probs', arrays: old },
  ]);
  if (!(lambda >= 0 && lambda <= 1)) throw new Error(`rlsdAdvantages: lambda must be in [0, 1], got ${lambda}`);
  let tokens = 0;
  let weightSum = 0;
  let clipped = 0;
  const advantages = samples.map((s, i) => {
    const a = adv[i];
    const sign = Math.sign(a);
    const out = new Float32Array(s.responseIds.length);
    for (let t = 0; t < out.length; t++) {
      const raw = Math.exp(sign * (teacher[i][t] - old[i][t]));
      const w = clip(raw, cfg.clipLow, cfg.clipHigh);
      out[t] = a * (1 - lambda + lambda * w);
      tokens++;
      weightSum += w;
      if (raw !== w) clipped++;
    }
    return out;
  });
  const metrics: Record<string, number> = { 'rlsd/lambda': lambda };
  if (tokens > 0) {
    metrics['rlsd/weight_mean'] = weightSum / tokens;
    metrics['rlsd/clip_frac'] = clipped / tokens;
  }
  return { advantages, metrics };
}

export const rlsd = defineMethod({
  name: 'rlsd',
  summary: 'per-token advantage weights from the teacher, λ 0.5 → 0 over 100 iterations',
  options,
  loop: 'rl',
  plan: ({ iteration, options: o, entropyCoef }) => {
    const lambda = rlsdLambda(iteration, o);
    // After the decay RLSD is plain GRPO: a teacher pass would be wasted.
    if (lambda <= 0) return { ...grpoPlan(entropyCoef), metrics: { 'rlsd/lambda': 0 } };
    return {
      ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true, metrics: { 'rlsd/lambda': lambda },
      transform: (x) => {
        if (!x.teacher) throw new Error('rlsd: the advantage transform needs teacher log-probs');
        return rlsdAdvantages(x.samples, x.advantages, x.teacher, x.old, lambda, o);
      },
    };
  },
});
