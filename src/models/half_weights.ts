// f16 copies of the weights a Qwen2/Qwen3 decode step reads as products (every
// layer's projections and the LM head; models/qwen_decode.ts), for rollouts and
// serving. A decode step reads each weight once per token, so its time goes mostly to
// the weights' bytes, and f16 halves them. The f32 parameters stay the masters that
// training updates; the owner of the copies (engines/local_engine.ts) packs them from
// the masters for each generation, so a rollout always samples from the weights of
// the latest update, and frees them after it.

import type { CausalLM } from './causal_lm.ts';
import { decodeWeightNames, lmHeadName } from './qwen_decode.ts';
import type { HalfWeightMap } from './token_batch.ts';
import { halfWeight, type HalfWeight } from '../tensor/ops/half.ts';

export class HalfWeights {
  private constructor(
    private readonly copies: Map<string, HalfWeight>,
    private readonly headName: string,
  ) {}

  /** Copies of `model`'s decode weights, packed from its parameters now. */
  static of(model: CausalLM): HalfWeights {
    const copies = new Map(decodeWeightNames(model).map((name) => [name, halfWeight(model.param(name))] as const));
    return new HalfWeights(copies, lmHeadName(model));
  }

  /** The copies by parameter name, as a forward's TokenBatch takes them. */
  get weights(): HalfWeightMap {
    return this.copies;
  }

  /** The LM head's copy. */
  get head(): HalfWeight {
    return this.copies.get(this.headName)!;
  }

  /** Bytes the copies hold. */
  get bytes(): number {
    let n = 0;
    for (const h of this.copies.values()) n += h.packed.bytes;
    return n;
  }

  dispose(): void {
    for (const h of this.copies.values()) h.packed.dispose();
    this.copies.clear();
  }
}
