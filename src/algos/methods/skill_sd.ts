// Skill-SD (docs/ALGORITHMS.md section 3): GRPO plus coef·mean_t[ρ·k3], a sampled-token
// reverse-KL estimate to the teacher with an importance ratio, gradient through both.

import { z } from 'zod';
import { scale } from '../../tensor/ops/index.ts';
import { skillSdTerm } from '../distill_loss.ts';
import { defineMethod } from '../method.ts';
import { nonNegNum, posNum } from '../options.ts';
import { grpoPlan } from '../plan.ts';

const options = z.strictObject({
  coef: nonNegNum.default(0.001),
  /** exp(min(lθ - lold, ratioCap)). */
  ratioCap: posNum.default(10),
  /** exp(min(-e, gapCap)). */
  gapCap: posNum.default(20),
});

export const skillSd = defineMethod({
  name: 'skill_sd',
  summary: '0.001·mean[ρ·k3] reverse-KL estimate to the teacher beside the policy gradient',
  options,
  loop: 'rl',
  plan: ({ options: o, entropyCoef }) => ({
    ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true,
    aux: async (x) => {
      const r = skillSdTerm(x, { ratioCap: o.ratioCap, gapCap: o.gapCap });
      return { loss: scale(r.term, o.coef), stats: { 'skill_sd/k3': r.k3Mean, 'skill_sd/ratio': r.ratioMean } };
    },
  }),
});
