// GRPO as the agent frameworks run it (docs/ALGORITHMS.md section 1): the backbone
// every other method builds on, with nothing added.

import { z } from 'zod';
import { defineMethod } from '../method.ts';
import { grpoPlan } from '../plan.ts';

export const grpo = defineMethod({
  name: 'grpo',
  summary: 'group-relative policy optimisation over turn samples (the backbone)',
  options: z.strictObject({}),
  loop: 'rl',
  plan: ({ entropyCoef }) => grpoPlan(entropyCoef),
});
