// What a training run will hold on the GPU, estimated from the model's shapes before
// anything is loaded, and the settings sized to fit a memory budget: whether layers are
// checkpointed, and how many rows a rollout batch decodes together. A run whose update
// cannot fit is refused here, naming the settings that would make it fit.
//
// The figures are f32 bytes (the kernels' storage): weights, the frozen reference copy,
// gradients and AdamW's two moments for what trains; per token, what a layer keeps for
// its backward (plain) or its input alone (checkpointed, plus one layer recomputed);
// per decoding row, the KV cache at its full length, beside one prefill chunk's layer
// (rollout prompts are prefilled in chunks of positions). A rollout batch's cache is as
// long as its own longest prompt and response, so the plan also gives the bytes batches
// may take (rolloutBatchBytes) and the engine fills each batch to those by its rows'
// real lengths: rolloutRows rows of the longest possible row always fit, and more rows
// of shorter prompts do. Transient buffers are counted with the pool's size-class slack
// (up to a quarter). A run's own shape bounds both: a
// micro-batch holds no more than an optimizer step's sequences, a rollout batch no more
// rows than the episodes played at once, so a run scaled down to a few short episodes
// is planned (and checkpointed, or not) for what it can hold, not for the settings' room.
// The buffer pool enforces the budget at run time whatever these estimates say
// (gpu/buffer_pool.ts).

import { expectedShapes } from '../hf_model/checkpoint.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import type { Runtime } from '../gpu/runtime.ts';

export const GIB = 2 ** 30;

/** The budget when neither the config nor the adapter gives one: a small laptop GPU's. */
export const DEFAULT_MEMORY_GIB = 4;

/** The log-prob op's budget for one chunk of logits (tensor/ops/logprob.ts). */
const CHUNK_LOGITS_BYTES = 512 * 2 ** 20;

/** Pool size classes round a request up by less than a quarter. */
const SLACK = 1.25;

/** A prefill chunk's most tokens (rows x positions), and its share of the room beside the resident weights. */
const MAX_PREFILL_TOKENS = 16384;

/** The update's micro-batches are never cut below this many tokens to fit a budget. */
const MIN_MICRO_BATCH_TOKENS = 2048;
const PREFILL_SHARE = 0.25;

export type Checkpointing = 'auto' | 'on' | 'off';

export interface PlanInput {
  model: ModelConfig;
  /** What trains: every weight, LoRA factors of rank `loraRank` on `loraTargets` modules per layer, or nothing (evaluation). */
  trains: 'all' | 'lora' | 'none';
  loraRank?: number;
  /** Linear modules per layer the adapter covers (7 when all of q, k, v, o, gate, up, down). */
  loraTargets?: number;
  /** A frozen copy of the starting weights scores the KL reference. */
  referenceCopy: boolean;
  /** Tokens (prompt + response) per forward and backward of the update. */
  microBatchTokens: number;
  /**
   * The most tokens one optimizer step's sequences hold (its samples at most at rowTokens
   * each): a micro-batch holds no more, whatever microBatchTokens allows. Unset: no bound.
   */
  stepTokens?: number;
  /** Rows a rollout batch decodes together, at most (0: rollouts come from a server). */
  rolloutRows: number;
  /** The most episodes a rollout of the run plays at once, which no batch outgrows. Unset: no bound. */
  rolloutEpisodes?: number;
  /** A row's longest sequence: prompt budget + response tokens. */
  rowTokens: number;
  budgetBytes: number;
  checkpointing: Checkpointing;
  /**
   * The rollout engine packs f16 copies of the decode weights for each generate call
   * (rt.policy.decode.weights f16, where decode steps fuse), held beside the f32 ones.
   */
  decodeCopies?: boolean;
}

export interface MemoryPlan {
  budgetBytes: number;
  /** Resident through the run: weights, reference, optimizer moments. */
  residentBytes: number;
  /** The update's peak: resident + gradients + activations + a logits chunk. */
  updateBytes: number;
  /** The most tokens of a micro-batch the update's peak is for. */
  updateTokens: number;
  /** The rollout's peak: resident + the decode weights' f16 copies + KV cache of `rolloutRows` rows + one layer's prefill + sampling logits. */
  rolloutBytes: number;
  checkpointLayers: boolean;
  /** Tokens per forward and backward of the update under the budget (never above the input's; the loss is the same however it is cut). */
  microBatchTokens: number;
  /** Rows of the longest possible row (rowTokens) a rollout batch may decode together under the budget (never above the input's). */
  rolloutRows: number;
  /**
   * Bytes a rollout batch's KV cache and sampling logits may take (decodeRowBytes a row,
   * for the batch's own longest row): LocalEngine's maxBatchBytes, which lets batches of
   * shorter rows hold more than rolloutRows rows, up to the input's rolloutRows.
   */
  rolloutBatchBytes: number;
  /** The input's rolloutRows (rollout.maxBatch): the most rows a batch of short rows takes within rolloutBatchBytes. */
  rolloutMaxRows: number;
  /** Of those, the most a rollout of the run fills: the rollout's peak is for these. */
  rolloutBusyRows: number;
  /** Tokens a rollout prefill takes at once (LocalEngine's prefillTokens). */
  prefillTokens: number;
  /** What the run will do differently from the settings as given, for the log. */
  notes: string[];
}

export class MemoryPlanError extends Error {
  override name = 'MemoryPlanError';
}

export function parameterCount(cfg: ModelConfig): number {
  let n = 0;
  for (const shape of expectedShapes(cfg).values()) n += shape.reduce((a, b) => a * b, 1);
  return n;
}

/** f32 values one token keeps in one layer for the backward (the plain tape): norms, projections, attention, the MLP. */
export function layerValuesPerToken(cfg: ModelConfig): number {
  const q = cfg.heads * cfg.headDim * (cfg.attnOutputGate ? 2 : 1);
  const kv = cfg.kvHeads * cfg.headDim;
  const mixer = cfg.linearAttention
    ? Math.max(6 * q + 6 * kv, 6 * (2 * cfg.linearAttention.numKeyHeads * cfg.linearAttention.keyHeadDim + 2 * cfg.linearAttention.numValueHeads * cfg.linearAttention.valueHeadDim))
    : 6 * q + 6 * kv;
  return 10 * cfg.hidden + mixer + 4 * cfg.intermediate;
}

/** KV-cache bytes of one row of `tokens` tokens (full-attention layers; Qwen3.5's linear layers keep a fixed state). */
export function kvBytesPerRow(cfg: ModelConfig, tokens: number): number {
  const full = cfg.layerTypes.filter((t) => t !== 'linear_attention').length;
  const lin = cfg.linearAttention;
  const state = lin ? (cfg.layers - full) * (lin.numValueHeads * lin.keyHeadDim * lin.valueHeadDim + (2 * lin.numKeyHeads * lin.keyHeadDim + lin.numValueHeads * lin.valueHeadDim) * lin.convKernel) * 4 : 0;
  return full * 2 * cfg.kvHeads * cfg.headDim * tokens * 4 + state;
}

/**
 * What one decoding row of a cache `capacity` tokens long holds: its KV cache and its
 * sampling logits, each with the pool's slack, as the plan counts a row. The cache's
 * slack is real: its buffers (a layer's keys or values for all the batch's rows) land
 * in size classes up to a quarter larger, and while a batch's rows take their copies of
 * a group's shared prompt, the distinct prompts' cache is held beside theirs (a 0.5B
 * rollout of 128 rows counted without it went 0.4 GiB past a 10 GiB budget).
 */
export function decodeRowBytes(cfg: ModelConfig, capacity: number): number {
  return SLACK * (kvBytesPerRow(cfg, capacity) + 4 * cfg.vocabSize);
}

function trainableCount(p: PlanInput, params: number): number {
  if (p.trains === 'none') return 0;
  if (p.trains === 'all') return params;
  const r = p.loraRank ?? 8;
  // Each adapted linear adds r·(in + out); in and out are at most hidden and intermediate.
  return p.model.layers * (p.loraTargets ?? 7) * r * (p.model.hidden + Math.max(p.model.hidden, p.model.intermediate));
}

/**
 * Whether LocalEngine will pack f16 copies of the decode weights (engines/local_engine.ts
 * halfWeights), by `rt`'s policy and adapter; before the GPU starts (null), as on a real
 * GPU with the default policy, the stricter guess.
 */
export function decodeCopiesHeld(rt: Runtime | null): boolean {
  if (!rt) return true;
  const { weights, fused } = rt.policy.decode;
  return weights === 'f16' && (fused === 'always' || (fused === 'auto' && !rt.caps.compatibility));
}

const gib = (b: number) => `${(b / GIB).toFixed(2)} GiB`;

/** How LocalEngine batches a rollout under `plan`: its maxBatch, maxBatchBytes and prefillTokens. */
export function rolloutBatching(plan: MemoryPlan): { maxBatch: number; maxBatchBytes: number; prefillTokens: number } {
  return { maxBatch: plan.rolloutMaxRows, maxBatchBytes: plan.rolloutBatchBytes, prefillTokens: plan.prefillTokens };
}

export function planMemory(p: PlanInput): MemoryPlan {
  const cfg = p.model;
  const params = parameterCount(cfg);
  const trainable = trainableCount(p, params);
  const residentBytes = 4 * (params * (p.referenceCopy ? 2 : 1) + (p.trains === 'lora' ? trainable : 0) + 2 * trainable);
  const layerToken = 4 * layerValuesPerToken(cfg);
  // What a micro-batch of at most `limit` tokens can hold in this run.
  const held = (limit: number) => Math.min(limit, p.stepTokens ?? Infinity);
  const update = (checkpoint: boolean, limit: number) => {
    // Evaluation has no update: what it holds is the rollout's.
    if (p.trains === 'none') return residentBytes;
    const tokens = held(limit);
    const acts = checkpoint ? tokens * (4 * cfg.hidden * cfg.layers + 2 * layerToken) : tokens * layerToken * cfg.layers;
    const chunk = Math.min(CHUNK_LOGITS_BYTES, 4 * cfg.vocabSize * Math.max(tokens, cfg.hidden));
    return residentBytes + 4 * trainable + SLACK * (acts + chunk);
  };
  const notes: string[] = [];
  let checkpointLayers = p.checkpointing === 'on';
  if (p.checkpointing === 'auto' && update(false, p.microBatchTokens) > p.budgetBytes) {
    checkpointLayers = true;
    notes.push(`layers checkpointed in the update (its plain tape needs ${gib(update(false, p.microBatchTokens))} of the ${gib(p.budgetBytes)} budget)`);
  }
  // Micro-batches halve until the update fits, down to a floor where a turn still fits whole.
  let microBatchTokens = p.microBatchTokens;
  while (update(checkpointLayers, microBatchTokens) > p.budgetBytes && microBatchTokens / 2 >= MIN_MICRO_BATCH_TOKENS) microBatchTokens = Math.floor(microBatchTokens / 2);
  const updateBytes = update(checkpointLayers, microBatchTokens);
  if (updateBytes > p.budgetBytes && p.trains !== 'none') {
    const advice = [
      `a larger gpu.memory (--gpu-memory) if the GPU has it`,
      ...(p.checkpointing === 'off' ? ['gpu.checkpointing: auto or on'] : []),
      ...(p.trains === 'all' ? ['model.lora (train an adapter instead of every weight)'] : []),
    ];
    throw new MemoryPlanError(`the update needs about ${gib(updateBytes)} (weights, optimizer state and gradients ${gib(residentBytes + 4 * trainable)}, ` +
      `activations of ${held(microBatchTokens)} tokens${checkpointLayers ? ' with checkpointed layers' : ''}) but the GPU memory budget is ${gib(p.budgetBytes)}; ` +
      `set ${advice.join(', or ')}`);
  }
  if (microBatchTokens < p.microBatchTokens) notes.push(`update micro-batches of ${microBatchTokens} tokens, not optim.microBatchTokens ${p.microBatchTokens}, to fit the budget`);
  // The f16 copies hold two bytes of (at most) every weight while a rollout decodes.
  const copyBytes = p.decodeCopies && p.rolloutRows > 0 ? 2 * params : 0;
  const room = p.budgetBytes - residentBytes - copyBytes;
  // One prefill chunk's layer at a time (chunked prefill, a layer's intermediates freed as it ends), and each row's KV cache and sampling logits.
  const prefillTokens = Math.max(1, Math.min(MAX_PREFILL_TOKENS, Math.floor((PREFILL_SHARE * room) / (SLACK * layerToken))));
  const perRow = decodeRowBytes(cfg, p.rowTokens);
  const batchBytes = Math.max(0, room - SLACK * layerToken * prefillTokens);
  const rows = Math.min(p.rolloutRows, Math.floor(batchBytes / perRow));
  // Rows a batch decodes at once: no more than the episodes a rollout plays together.
  const wanted = Math.min(p.rolloutRows, p.rolloutEpisodes ?? Infinity);
  const busy = Math.min(rows, wanted);
  if (p.rolloutRows > 0 && rows < 1) {
    throw new MemoryPlanError(`one rollout row of ${p.rowTokens} tokens needs about ${gib(perRow)} beside the resident ${gib(residentBytes)}` +
      `${copyBytes ? ` and the decode weights' f16 copies ${gib(copyBytes)}` : ''}, over the GPU memory budget of ${gib(p.budgetBytes)}; ` +
      `set a larger gpu.memory (--gpu-memory), or fewer rollout.maxPromptTokens or rollout.maxResponseTokens${copyBytes ? ', or --decode-weights f32' : ''}`);
  }
  if (rows < wanted) {
    notes.push(`rollout batches of ${rows} rows of ${p.rowTokens} tokens fit the budget; shorter rows fill batches up to rollout.maxBatch ${p.rolloutRows} by their own lengths`);
  }
  return {
    budgetBytes: p.budgetBytes, residentBytes, updateBytes, updateTokens: held(microBatchTokens),
    // A prefill chunk holds no more than the busy rows' prompts.
    // Batches of shorter rows may hold more rows, within batchBytes.
    rolloutBytes: residentBytes + copyBytes + SLACK * layerToken * Math.min(prefillTokens, busy * p.rowTokens) +
      Math.min(batchBytes, wanted * perRow),
    checkpointLayers, microBatchTokens, rolloutRows: rows, rolloutBatchBytes: batchBytes, rolloutMaxRows: p.rolloutRows, rolloutBusyRows: busy, prefillTokens, notes,
  };
}

export function describePlan(plan: MemoryPlan): string {
  return `GPU memory budget ${gib(plan.budgetBytes)}: resident ${gib(plan.residentBytes)}, ` +
    `update peak at most about ${gib(plan.updateBytes)} (micro-batches of up to ${plan.updateTokens} tokens${plan.checkpointLayers ? ', checkpointed layers' : ''}), ` +
    `rollout peak at most about ${gib(plan.rolloutBytes)} (${plan.rolloutBusyRows} rows)`;
}
