// A training run's GPU memory: the budget (gpu.memory, else a small laptop GPU's 4
// GiB: WebGPU does not report how much memory a GPU has) and the plan that fits the
// run's settings into it (models/memory_plan.ts), made from config.json alone before
// the weights are loaded.

import { readModelConfig } from '../models/checkpoint.ts';
import { DEFAULT_MEMORY_GIB, GIB, planMemory, type MemoryPlan } from '../models/memory_plan.ts';
import type { TrainConfig } from '../config/config_schema.ts';
import { methodDefinition } from '../algos/methods/index.ts';

/** The run's budget in bytes. */
export function memoryBudgetBytes(cfg: TrainConfig): number {
  return (cfg.gpu.memory ?? DEFAULT_MEMORY_GIB) * GIB;
}

/** The plan for training `cfg`'s model (from its config.json) within `cfg`'s budget; throws MemoryPlanError when it cannot fit. */
export function trainingMemoryPlan(cfg: TrainConfig, modelDir = cfg.model.path): MemoryPlan {
  const lora = cfg.model.lora;
  return planMemory({
    model: readModelConfig(modelDir),
    trains: lora ? 'lora' : 'all',
    loraRank: lora?.r,
    loraTargets: lora?.targetModules.length,
    referenceCopy: methodDefinition(cfg.method).loop === 'rl' && cfg.algorithm.klCoef > 0 && !lora,
    microBatchTokens: cfg.optim.microBatchTokens,
    rolloutRows: cfg.rollout.engine === 'local' ? cfg.rollout.maxBatch : 0,
    rowTokens: cfg.rollout.maxPromptTokens + cfg.rollout.maxResponseTokens,
    budgetBytes: memoryBudgetBytes(cfg),
    checkpointing: cfg.gpu.checkpointing,
  });
}
