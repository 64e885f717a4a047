// A PEFT adapter with random non-zero A and B (fresh adapters have B = 0 and change nothing).

import type { QwenModel } from '../../src/models/qwen.ts';
import { loraTargets, writePeftAdapter, type LoraWeights } from '../../src/lora/peft.ts';
import type { LoraConfig } from '../../src/models/causal_lm.ts';
import { randn } from '../../src/util/random.ts';

/** Writes an adapter on the q/v/down projections of `model` to `dir`. */
export async function writeRandomAdapter(model: QwenModel, dir: string, seed: number): Promise<void> {
  const lora: LoraConfig = { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], baseModel: null };
  const weights = new Map<string, LoraWeights>();
  loraTargets(model.config, lora.targetModules).forEach((t, i) => {
    weights.set(t.module, { a: randn(lora.r * t.inFeatures, seed + 2 * i, 0.2), b: randn(t.outFeatures * lora.r, seed + 2 * i + 1, 0.2) });
  });
  await writePeftAdapter(dir, model.config, lora, weights);
}
