// Which weights a run trains: the LoRA branches, the parameters `model.trainable`
// names (the rest freeze), or every parameter. Shared by the RL loop and SFT.

import type { CausalLM } from '../models/causal_lm.ts';
import { loraParameters } from '../lora/lora.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { ConfigError } from '../config/config.ts';
import type { TrainConfig } from '../config/config_schema.ts';

export function trainableParams(model: CausalLM, cfg: TrainConfig): Tensor[] {
  if (cfg.model.lora) return loraParameters(model);
  const all = model.parameters();
  const want = cfg.model.trainable;
  if (!want) return all;
  const chosen = all.filter((p) => want.some((w) => p.name?.includes(w)));
  if (!chosen.length) throw new ConfigError(`model.trainable ${JSON.stringify(want)} matches no parameter of ${cfg.model.path}`);
  for (const p of all) p.requiresGrad = chosen.includes(p);
  return chosen;
}
