// GRPO+OPSD (docs/ALGORITHMS.md section 3): SDAR with β = 0, a constant gate of 0.5.

import { defineMethod } from '../method.ts';
import { grpoPlan } from '../plan.ts';
import { gatedDistillOptions, sdarAux } from './sdar.ts';

export const grpoOpsd = defineMethod({
  name: 'grpo_opsd',
  summary: 'the SDAR term with a constant gate 0.5',
  options: gatedDistillOptions(0),
  loop: 'rl',
  plan: ({ options: o, entropyCoef }) => ({ ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true, aux: sdarAux(o.beta, o.coef) }),
});
