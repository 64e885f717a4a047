// f16 copies of the weights a Qwen2/Qwen3 decode step reads as products (every
// layer's projections and the LM head; models/qwen_decode.ts), for rollouts and
// serving. A decode step reads each weight once per token, so its time goes mostly to
// the weights' bytes, and f16 halves them. The f32 parameters stay the masters that
// training updates; the owner of the copies (engines/local_engine.ts) packs them from
// the masters for each generation, so a rollout always samples from the weights of
// the latest update, and frees them after it. A layer's q, k and v projections are
// copied stacked as one weight (and their biases as one vector), so a step runs them
// as one product on either kernel. A weight with a LoRA branch is copied with the
// branch merged in (W + scaling B A, what the model computes), so a LoRA policy
// decodes on the fused kernels at the cost of full weights.

import type { CausalLM } from './causal_lm.ts';
import { decodeWeightNames, lmHeadName, stackedQkvNames } from './qwen_decode.ts';
import type { HalfWeightMap } from './token_batch.ts';
import { noGrad } from '../tensor/autograd.ts';
import { add, scale } from '../tensor/ops/elementwise.ts';
import { matmul } from '../tensor/ops/matmul.ts';
import { concat } from '../tensor/ops/shape_ops.ts';
import { halfWeight, stackedHalfWeight, type HalfWeight } from '../tensor/ops/half.ts';
import { keep, scope } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** The weight `name` as the model applies it: with its LoRA branch merged in (a temporary of the enclosing scope), else the parameter. */
function effectiveWeight(model: CausalLM, name: string): Tensor {
  const branch = model.lora.get(name);
  const w = model.param(name);
  return branch ? noGrad(() => add(w, scale(matmul(branch.b, branch.a), branch.scaling))) : w;
}

export class HalfWeights implements HalfWeightMap {
  private constructor(
    private readonly copies: Map<string, HalfWeight>,
    private readonly biases: Map<string, Tensor>,
    private readonly headName: string,
  ) {}

  /** Copies of `model`'s decode weights, packed from its parameters now. */
  static of(model: CausalLM): HalfWeights {
    const copies = new Map<string, HalfWeight>();
    const biases = new Map<string, Tensor>();
    const inStack = new Set<string>();
    for (let l = 0; l < model.config.layers; l++) {
      const stacked = stackedQkvNames(model, l);
      copies.set(stacked.weight, scope(() => stackedHalfWeight(stacked.weights.map((n) => effectiveWeight(model, n)))));
      if (model.config.attentionBias) biases.set(stacked.bias, keep(noGrad(() => concat(stacked.biases.map((n) => model.param(n)), 0))));
      for (const n of stacked.weights) inStack.add(n);
    }
    for (const name of decodeWeightNames(model)) if (!inStack.has(name)) copies.set(name, scope(() => halfWeight(effectiveWeight(model, name))));
    return new HalfWeights(copies, biases, lmHeadName(model));
  }

  get(name: string): HalfWeight | undefined {
    return this.copies.get(name);
  }

  bias(name: string): Tensor | undefined {
    return this.biases.get(name);
  }

  /** The copies, as a forward's TokenBatch takes them. */
  get weights(): HalfWeightMap {
    return this;
  }

  /** The LM head's copy. */
  get head(): HalfWeight {
    return this.copies.get(this.headName)!;
  }

  /** Bytes the copies hold. */
  get bytes(): number {
    let n = 0;
    for (const h of this.copies.values()) n += h.packed.bytes;
    for (const b of this.biases.values()) n += b.bytes;
    return n;
  }

  dispose(): void {
    for (const h of this.copies.values()) h.packed.dispose();
    for (const b of this.biases.values()) b.dispose();
    this.copies.clear();
    this.biases.clear();
  }
}
