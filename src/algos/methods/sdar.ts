// SDAR, gated self-distillation (docs/ALGORITHMS.md section 3): GRPO plus
// coef·mean_t[g·(lT − lθ)] with g = sg(σ(β·(lT − lθ))), the teacher being the current
// weights with the skills block.

import { z } from 'zod';
import { scale } from '../../tensor/ops/index.ts';
import { sdarTerm } from '../distill_loss.ts';
import { defineMethod } from '../method.ts';
import { nonNegNum } from '../options.ts';
import { grpoPlan, type AuxLoss } from '../plan.ts';

/** The SDAR term's options: the gate's sharpness β (0: a constant gate 0.5) and its coefficient. */
export const gatedDistillOptions = (beta: number) => z.strictObject({ beta: nonNegNum.default(beta), coef: nonNegNum.default(0.01) });

/** The SDAR-form auxiliary term with its statistics. */
export function sdarAux(beta: number, coef: number): AuxLoss {
  return async (x) => {
    const r = sdarTerm(x, beta);
    return { loss: scale(r.term, coef), stats: { 'sdar/gate_mean': r.gateMean, 'sdar/gate_above_half': r.gateShare, 'sdar/gap': r.gap } };
  };
}

export const sdar = defineMethod({
  name: 'sdar',
  summary: 'gated self-distillation term 0.01·mean[σ(5Δ)·(lT − lθ)] beside the policy gradient',
  options: gatedDistillOptions(5),
  loop: 'rl',
  plan: ({ options: o, entropyCoef }) => ({ ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true, aux: sdarAux(o.beta, o.coef) }),
});
