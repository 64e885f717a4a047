// What one RL iteration of a method does, as data the iteration loop executes
// (docs/ALGORITHMS.md section 3): where the skills block goes, whether a teacher pass
// runs, whether the policy-gradient term is on, the entropy coefficient, an
// advantage transform and an auxiliary loss term, and the schedule values to log.

import type { SkillsMode } from '../rollout/agent_loop.ts';
import type { StepSample } from '../rollout/sample.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface TransformInputs {
  samples: readonly StepSample[];
  /** The backbone's per-sample GRPO advantages. */
  advantages: Float64Array;
  /** lT per response token; null when the plan has no teacher pass. */
  teacher: Float32Array[] | null;
  /** lold per response token (recomputed with the current weights). */
  old: Float32Array[];
}

/** Per-token advantages of every sample, and the transform's statistics. */
export type AdvantageTransform = (x: TransformInputs) => { advantages: Float32Array[]; metrics: Record<string, number> };

/** What an auxiliary term sees of one micro-batch: tensors over its response tokens, sample after sample. */
export interface AuxInputs {
  /** lθ, differentiable. */
  logprobs: Tensor;
  teacherLogprobs: Tensor;
  oldLogprobs: Tensor;
  /** The micro-batch's share of the mini-batch token mean: 1/(response tokens of the mini-batch) on every token. */
  weights: Tensor;
  /** Where each sample's response sits in the arrays. */
  segments: { start: number; length: number }[];
}

/** An auxiliary loss term added to the policy loss (already scaled by its coefficient), with named scalar statistics. */
export type AuxLoss = (inputs: AuxInputs) => Promise<{ loss: Tensor; stats: Record<string, Tensor> }>;

export interface IterationPlan {
  skills: SkillsMode;
  teacher: boolean;
  policyGradient: boolean;
  entropyCoef: number;
  transform: AdvantageTransform | null;
  aux: AuxLoss | null;
  /** Schedules in force this iteration (RLSD's λ, ADRS's η...). */
  metrics: Record<string, number>;
}

/** The GRPO backbone's plan: no skills, no teacher, the policy gradient on. */
export function grpoPlan(entropyCoef: number): IterationPlan {
  return { skills: 'none', teacher: false, policyGradient: true, entropyCoef, transform: null, aux: null, metrics: {} };
}
