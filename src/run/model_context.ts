// A run's token budgets against its model's context (config.json's
// max_position_embeddings), refused before any GPU work. A turn's prompt budget is
// rollout.maxPromptTokens, clamped to the context less rollout.maxResponseTokens so
// the response fits too (rollout/agent_loop.ts promptBudget); a budget above the
// context itself is a setting that can never hold, so it is refused rather than
// silently clamped.

import { readModelConfig } from '../hf_model/checkpoint.ts';
import type { TrainConfig } from '../config/config.ts';

export function checkModelContext(cfg: TrainConfig): void {
  const context = readModelConfig(cfg.model.path).maxPositions;
  const { maxPromptTokens: prompt, maxResponseTokens: response } = cfg.rollout;
  const model = `${cfg.model.path}'s context of ${context} tokens (max_position_embeddings)`;
  if (response >= context) throw new Error(`rollout.maxResponseTokens: ${response} leaves no room for a prompt in ${model}; set it below ${context}`);
  if (prompt > context) {
    throw new Error(`rollout.maxPromptTokens: ${prompt} is more than ${model}; set it to ${context} or less `
      + `(each turn's prompt is held to the context less rollout.maxResponseTokens, ${context - response} tokens here, whatever it says)`);
  }
}
