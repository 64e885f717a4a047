// One GRPO iteration: roll out groups, score turns, compute advantages, recompute
// old log-probs with the current weights (as verl does, so sampling temperature and
// batching cannot skew the ratio), reference log-probs from the frozen model, then
// the mini-batched update.

import type { CausalLM } from '../models/causal_lm.ts';
import { groupAdvantages } from '../algos/advantage.ts';
import { runRollout, type RolloutOptions, type RolloutResult } from '../rollout/agent_loop.ts';
import { policyUpdate, responseLogprobs, splitMicroBatches, type UpdateContext, type UpdateMetrics } from './update.ts';

/** Where reference log-probs come from: a frozen copy, the LoRA model with its adapters off, or none (no KL). */
export type Reference = { kind: 'model'; model: CausalLM } | { kind: 'lora-base' } | { kind: 'none' };

export interface IterationResult {
  rollout: RolloutResult;
  update: UpdateMetrics | null;
  times: { rollout: number; reference: number; oldLogprobs: number; update: number };
}

/** Runs fn with the model's LoRA branches detached (the frozen base is the reference). */
export async function withoutLora<T>(model: CausalLM, fn: () => Promise<T>): Promise<T> {
  const saved = new Map(model.lora);
  model.lora.clear();
  try {
    return await fn();
  } finally {
    for (const [k, v] of saved) model.lora.set(k, v);
  }
}

export async function grpoIteration(
  rolloutOpts: RolloutOptions, update: UpdateContext, reference: Reference,
): Promise<IterationResult> {
  const now = () => performance.now() / 1000;
  const t0 = now();
  const rollout = await runRollout(rolloutOpts);
  const t1 = now();
  const samples = rollout.samples;
  if (!samples.length) return { rollout, update: null, times: { rollout: t1 - t0, reference: 0, oldLogprobs: 0, update: 0 } };

  const advantages = groupAdvantages(samples);
  const all = samples.map((_, i) => i);
  const batches = splitMicroBatches(samples, all, update.microBatchTokens);
  const oldLogprobs = await responseLogprobs(update.model, samples, batches);
  const t2 = now();
  let refLogprobs: Float32Array[] | null = null;
  if (update.loss.klCoef > 0 && reference.kind !== 'none') {
    refLogprobs = reference.kind === 'model'
      ? await responseLogprobs(reference.model, samples, batches)
      : await withoutLora(update.model, () => responseLogprobs(update.model, samples, batches));
  }
  const t3 = now();
  const metrics = await policyUpdate(update, samples, advantages, oldLogprobs, refLogprobs);
  const t4 = now();
  return { rollout, update: metrics, times: { rollout: t1 - t0, oldLogprobs: t2 - t1, reference: t3 - t2, update: t4 - t3 } };
}
