// Dr. GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training"): GRPO without the
// division by the group's standard deviation, which makes a group whose scores barely
// differ weigh as much as one whose scores differ a lot:
//   A = score − mean(scores of the group's turn samples)
// broadcast to every token; a group of one keeps its score, as in the backbone. Its
// other change, no per-response length normaliser, is the backbone's token mean
// over the mini-batch already.

import { z } from 'zod';
import { defineMethod } from '../method.ts';
import { grpoPlan } from '../plan.ts';
import { groupIndices, meanOf } from '../token_stats.ts';

export const drGrpo = defineMethod({
  name: 'dr_grpo',
  summary: 'GRPO without the standard-deviation division: A = score − group mean',
  options: z.strictObject({}),
  loop: 'rl',
  plan: ({ entropyCoef }) => ({
    ...grpoPlan(entropyCoef),
    transform: ({ samples }) => {
      const adv = new Float64Array(samples.length);
      for (const idx of groupIndices(samples, (s) => s.groupId).values()) {
        const mean = idx.length > 1 ? meanOf(idx.map((i) => samples[i].score)) : 0;
        for (const i of idx) adv[i] = samples[i].score - mean;
      }
      return { advantages: samples.map((s, i) => new Float32Array(s.responseIds.length).fill(adv[i])), metrics: {} };
    },
  }),
});
