// Greedy decoding with the KV cache: one batched prefill of the (left-padded) prompts,
// then one token per step. The rollout engine builds sampling on the same steps.

import type { CausalLM } from '../models/causal_lm.ts';
import { noGrad } from '../tensor/autograd.ts';
import { linearDecode } from '../tensor/ops/decode.ts';
import type { HalfWeight } from '../tensor/ops/half.ts';
import { linear, reshape, slice } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

/**
 * Logits [batch, vocab] of the last position of hidden [batch, seq, hidden]; with
 * `head` (an f16 copy of the LM head, inference only) on the skinny kernels from it.
 */
export function lastLogits(model: CausalLM, hidden: Tensor, head?: HalfWeight): Tensor {
  const [B, T, H] = hidden.shape;
  const last = reshape(slice(hidden, 1, T - 1, T), [B, H]);
  return head ? linearDecode(last, head) : linear(last, model.lmHead());
}

function argmaxRows(logits: Float32Array, rows: number, vocab: number): Int32Array {
  const out = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    let best = 0;
    for (let j = 1; j < vocab; j++) if (logits[r * vocab + j] > logits[r * vocab + best]) best = j;
    out[r] = best;
  }
  return out;
}

/**
 * Greedy continuation of `prompt` ([batch, promptLen] row-major, left-padded by
 * `padLeft`) by `newTokens` tokens; returns [batch, promptLen + newTokens].
 */
export async function greedyGenerate(model: CausalLM, prompt: Int32Array, newTokens: number, opts: { batch?: number; padLeft?: Int32Array } = {}): Promise<Int32Array> {
  const B = opts.batch ?? 1;
  const P = prompt.length / B;
  const V = model.config.vocabSize;
  const out = new Int32Array(B * (P + newTokens));
  for (let b = 0; b < B; b++) out.set(prompt.subarray(b * P, (b + 1) * P), b * (P + newTokens));
  const cache = model.newCache(B, P + newTokens, opts.padLeft);
  try {
    let step = prompt;
    for (let i = 0; i < newTokens; i++) {
      const logits = await scopeAsync(async () => Float32Array.from(await noGrad(() => lastLogits(model, model.hiddenCached({ ids: step, batch: B, seq: step.length / B }, cache))).toArray()));
      step = argmaxRows(logits, B, V);
      for (let b = 0; b < B; b++) out[b * (P + newTokens) + P + i] = step[b];
    }
  } finally {
    cache.dispose();
  }
  return out;
}
