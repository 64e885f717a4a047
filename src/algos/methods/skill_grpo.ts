// Skill-GRPO (docs/ALGORITHMS.md section 3): GRPO whose own prompts carry the task
// type's skills block; validation runs with it and without it.

import { z } from 'zod';
import { defineMethod } from '../method.ts';
import { grpoPlan } from '../plan.ts';

export const skillGrpo = defineMethod({
  name: 'skill_grpo',
  summary: 'GRPO with the skills block in the policy\'s own prompt; validates with and without it',
  options: z.strictObject({}),
  loop: 'rl',
  plan: ({ entropyCoef }) => ({ ...grpoPlan(entropyCoef), skills: 'policy' }),
});
