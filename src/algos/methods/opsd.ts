// OPSD (docs/ALGORITHMS.md section 3): the SDAR term with the policy-gradient term off
// (the KL and entropy terms stay).

import { defineMethod } from '../method.ts';
import { grpoPlan } from '../plan.ts';
import { gatedDistillOptions, sdarAux } from './sdar.ts';

export const opsd = defineMethod({
  name: 'opsd',
  summary: 'the SDAR term without the policy gradient',
  options: gatedDistillOptions(5),
  loop: 'rl',
  plan: ({ options: o, entropyCoef }) => ({ ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true, policyGradient: false, aux: sdarAux(o.beta, o.coef) }),
});
