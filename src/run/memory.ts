// A training run's GPU memory: the budget (gpu.memory, else a small laptop GPU's 4
// GiB: WebGPU does not report how much memory a GPU has) and the plan that fits the
// run's settings into it (memory/memory_plan.ts), made from config.json alone before
// the weights are loaded.

import { currentRuntime, runtime } from '../gpu/runtime.ts';
import { readModelConfig } from '../hf_model/checkpoint.ts';
import { decodeCopiesHeld, DEFAULT_MEMORY_GIB, describePlan, GIB, planMemory, type MemoryPlan, type PlanInput } from '../memory/memory_plan.ts';
import type { TrainConfig } from '../config/config_schema.ts';
import { methodDefinition } from '../algos/methods/index.ts';

/** The run's budget in bytes. */
export function memoryBudgetBytes(cfg: TrainConfig): number {
  return (cfg.gpu.memory ?? DEFAULT_MEMORY_GIB) * GIB;
}

/** What the plan for training `cfg`'s model (from its config.json) within `cfg`'s budget starts from. */
export function planInput(cfg: TrainConfig, modelDir = cfg.model.path): PlanInput {
  const lora = cfg.model.lora;
  return {
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
    decodeCopies: cfg.rollout.engine === 'local' && decodeCopiesHeld(currentRuntime()),
  };
}

/** The plan for training `cfg`; throws MemoryPlanError when it cannot fit. */
export function trainingMemoryPlan(cfg: TrainConfig, modelDir = cfg.model.path): MemoryPlan {
  return planMemory(planInput(cfg, modelDir));
}

/** The run's plan, its budget set as the buffer pool's cap, and the plan and every change it made to the settings in the log. */
export function applyMemoryPlan(cfg: TrainConfig, log: (line: string) => void, modelDir = cfg.model.path): MemoryPlan {
  const plan = trainingMemoryPlan(cfg, modelDir);
  runtime().pool.limit = plan.budgetBytes;
  log(`${describePlan(plan)}${cfg.gpu.memory === undefined ? ' (the default budget: set gpu.memory or --gpu-memory for a larger GPU)' : ''}`);
  for (const note of plan.notes) log(`memory: ${note}`);
  return plan;
}
