// A training run's GPU memory: the budget (gpu.memory, else a small laptop GPU's 4
// GiB: WebGPU does not report how much memory a GPU has) and the plan that fits the
// run's settings into it (memory/memory_plan.ts), made from config.json alone before
// the weights are loaded.

import { currentRuntime, runtime } from '../gpu/runtime.ts';
import { readModelConfig } from '../hf_model/checkpoint.ts';
import { decodeCopiesHeld, DEFAULT_MEMORY_GIB, describePlan, GIB, planMemory, type MemoryPlan, type PlanInput } from '../memory/memory_plan.ts';
import type { TrainConfig } from '../config/config_schema.ts';
import { methodDefinition } from '../algos/methods/index.ts';
import { promptBudget } from '../rollout/agent_loop.ts';

/** The run's budget in bytes. */
export function memoryBudgetBytes(cfg: TrainConfig): number {
  return (cfg.gpu.memory ?? DEFAULT_MEMORY_GIB) * GIB;
}

/**
 * What the plan for training `cfg`'s model (from its config.json) within `cfg`'s budget
 * starts from, with the bounds the run's shape sets: a sequence holds at most the prompt
 * budget the model's context leaves and a response; an optimizer step at most
 * optim.miniBatchSize of them (an RL step no more than an iteration's turns); a rollout
 * plays at most an iteration's episodes (rollout.concurrency of them) or a validation's.
 */
export function planInput(cfg: TrainConfig, modelDir = cfg.model.path): PlanInput {
  const lora = cfg.model.lora;
  const model = readModelConfig(modelDir);
  const r = cfg.rollout;
  const rl = methodDefinition(cfg.method).loop === 'rl';
  const sequenceTokens = promptBudget(r.maxPromptTokens, r.maxResponseTokens, model.maxPositions) + r.maxResponseTokens;
  const stepSequences = rl ? Math.min(cfg.optim.miniBatchSize, r.tasksPerIteration * r.groupSize * r.maxTurns) : cfg.optim.miniBatchSize;
  const training = rl ? Math.min(r.concurrency ?? Infinity, r.tasksPerIteration * r.groupSize) : 0;
  const validation = Math.min(r.concurrency ?? Infinity, cfg.validation.tasks * cfg.validation.runs);
  return {
    model,
    stepTokens: stepSequences * sequenceTokens,
    rolloutEpisodes: Math.max(training, validation),
    trains: lora ? 'lora' : 'all',
    loraRank: lora?.r,
    loraTargets: lora?.targetModules.length,
    referenceCopy: methodDefinition(cfg.method).loop === 'rl' && cfg.algorithm.klCoef > 0 && !lora,
    microBatchTokens: cfg.optim.microBatchTokens,
    rolloutRows: cfg.rollout.engine === 'local' ? cfg.rollout.maxBatch : 0,
    rowTokens: sequenceTokens,
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
