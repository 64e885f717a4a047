// The GRPO token loss as the agent frameworks compute it
// (docs/ALGORITHMS.md section 1), on GPU tensors over the response tokens of a micro-batch:
//   r = exp(lθ - lold); L1 = -A r; L2 = -A clip(r, 1-ε, 1+ε); Lclip = max(L1, L2)
//   dual clip: where A < 0, the token loss is min(Lclip, -c A)
//   rollout correction: the token loss times w, the engine-trainer weight (rollout_correction.ts)
//   k3 KL to the reference: k = exp(lref - lθ) - (lref - lθ) - 1, clamped to [-10, 10]
//   L = mean_t(token loss) + c_KL mean_t(k) - c_H mean_t(entropy) (+ auxiliary terms)
// mean_t is a weighted sum with weight 1/count on valid response tokens and 0
// elsewhere, so padding and prompt positions drop out.

import { add, affine, clamp, exp, maximum, minimum, mul, neg, scale, sub, sum } from '../tensor/ops/index.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface PolicyLossConfig {
  clipLow: number;
  clipHigh: number;
  /** Dual-clip constant c (3 in the reference); 0 disables it. */
  dualClip: number;
  klCoef: number;
  entropyCoef: number;
  /** false drops the policy-gradient term from the loss (OPSD); it is still computed for the metrics. */
  policyGradient: boolean;
}

export const DEFAULT_POLICY_LOSS: PolicyLossConfig = { clipLow: 0.2, clipHigh: 0.2, dualClip: 3, klCoef: 0.01, entropyCoef: 0.001, policyGradient: true };

export interface TokenInputs {
  /** lθ [N], differentiable. */
  logprobs: Tensor;
  /** lold [N]. */
  oldLogprobs: Tensor;
  /** A per token [N]. */
  advantages: Tensor;
  /** 1 where A < 0, else 0 [N]. */
  negativeMask: Tensor;
  /** 1/count on valid tokens, 0 elsewhere [N]. */
  weights: Tensor;
  /** lref [N]; needed when klCoef > 0. */
  refLogprobs?: Tensor;
  /** Entropy per token [N]; needed when entropyCoef > 0. */
  entropy?: Tensor;
  /** The rollout correction's weight per token [N]; absent, every token weighs 1. Only the policy-gradient term takes it. */
  correctionWeights?: Tensor;
}

export interface PolicyLossTerms {
  loss: Tensor;
  pg: Tensor;
  kl?: Tensor;
  entropy?: Tensor;
  /** Per-token ratio r, for clip-fraction metrics. */
  ratio: Tensor;
}

/** mean_t(x) with the micro-batch's token weights. */
export function tokenMean(x: Tensor, weights: Tensor): Tensor {
  return sum(mul(x, weights));
}

export function k3(logprobs: Tensor, refLogprobs: Tensor): Tensor {
  const d = sub(refLogprobs, logprobs);
  return clamp(sub(exp(d), addOne(d)), -10, 10);
}

const addOne = (x: Tensor) => affine(x, 1, 1);

export function policyLoss(t: TokenInputs, cfg: PolicyLossConfig): PolicyLossTerms {
  const ratio = exp(sub(t.logprobs, t.oldLogprobs));
  const negA = neg(t.advantages);
  const l1 = mul(negA, ratio);
  const l2 = mul(negA, clamp(ratio, 1 - cfg.clipLow, 1 + cfg.clipHigh));
  let token = maximum(l1, l2);
  if (cfg.dualClip > 0) {
    const dual = minimum(token, scale(negA, cfg.dualClip));
    token = add(token, mul(t.negativeMask, sub(dual, token)));
  }
  if (t.correctionWeights) token = mul(token, t.correctionWeights);
  const pg = tokenMean(token, t.weights);
  // A zero-weighted pg keeps the loss a function of lθ even when no other term is on.
  let loss = cfg.policyGradient ? pg : scale(pg, 0);
  let kl: Tensor | undefined;
  let entropy: Tensor | undefined;
  if (cfg.klCoef > 0) {
    if (!t.refLogprobs) throw new Error('policyLoss: klCoef > 0 needs reference log-probs');
    kl = tokenMean(k3(t.logprobs, t.refLogprobs), t.weights);
    loss = add(loss, scale(kl, cfg.klCoef));
  }
  if (t.entropy) {
    entropy = tokenMean(t.entropy, t.weights);
    if (cfg.entropyCoef > 0) loss = sub(loss, scale(entropy, cfg.entropyCoef));
  }
  return { loss, pg, kl, entropy, ratio };
}
