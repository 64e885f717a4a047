// RLSD (shared design ALGORITHMS.md section 3): no auxiliary loss; the teacher
// reweights the GRPO advantage per sampled token,
//   w = clip(exp(sign(A)·(lT − lold)), clipLow, clipHigh),  Â = A·[(1 − λ) + λ·w],
// so a positive advantage grows on tokens the teacher likes more than the rollout
// policy did and a negative one grows on tokens it likes less. λ decays linearly
// from lambdaStart to 0, after which RLSD is plain GRPO.

import type { StepSample } from '../rollout/sample.ts';
import type { TrainConfig } from '../trainer/config_schema.ts';
import { checkTransformInputs, clip } from './token_stats.ts';

export type RlsdConfig = TrainConfig['algorithm']['rlsd'];

/**
 * λ of a 1-based iteration. This project's choice of endpoints (the text only says
 * "linearly from 0.5 to 0 over 100 iterations"): iteration 1 gets lambdaStart and
 * each iteration takes lambdaStart/decayIterations off, so iterations
 * 1..decayIterations reweight and iteration decayIterations + 1 onwards has λ = 0.
 */
export function rlsdLambda(iteration: number, cfg: RlsdConfig): number {
  if (!Number.isInteger(iteration) || iteration < 1) throw new Error(`rlsdLambda: iteration must be an integer >= 1, got ${iteration}`);
  return cfg.lambdaStart * Math.max(0, 1 - (iteration - 1) / cfg.decayIterations);
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
