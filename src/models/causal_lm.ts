// What scoring, generation, LoRA and the engines need from a decoder, so they run on
// every model class: Qwen2/Qwen3 (QwenModel) and Qwen3.5's hybrid (Qwen35Model).

import type { ModelConfig } from '../hf_model/config.ts';
import type { PrefixBatch, PrefixedRows, TokenBatch } from './token_batch.ts';
import type { LoraBranch } from '../nn/linear.ts';
import type { Tensor } from '../tensor/tensor.ts';

export type ParamMap = Map<string, Tensor>;

/**
 * An adapter's settings as PEFT's adapter_config.json holds them (lora/peft.ts reads
 * and writes that file). The model carries the attached adapter's, so that saving it
 * writes what was attached.
 */
export interface LoraConfig {
  r: number;
  alpha: number;
  /** Module name suffixes, as PEFT's target_modules: 'q_proj', 'v_proj', ... */
  targetModules: string[];
  baseModel: string | null;
  useRslora?: boolean;
}

/** Per-sequence inference state (KV cache, recurrent state) that grows by `length` tokens per call. */
export interface ModelCache {
  readonly batch: number;
  /** Tokens the cache can hold in total. */
  readonly capacity: number;
  /** Tokens already processed. */
  length: number;
  /** Left padding of each row, fixed when the cache is made. */
  readonly padLeft: Int32Array | undefined;
  /** A cache of rows `rows` of this one, in that order, at the same length (this one is left as it was). */
  takeRows(rows: readonly number[]): ModelCache;
  dispose(): void;
}

export interface CausalLM {
  readonly config: ModelConfig;
  /** Parameters under their Hugging Face names. */
  readonly params: ParamMap;
  /** LoRA branches by the HF name of the linear weight they adapt. */
  readonly lora: Map<string, LoraBranch>;
  loraConfig: LoraConfig | null;
  /** Keep only each layer's input for the backward and recompute the rest there (models/layer_step.ts). */
  checkpointLayers: boolean;
  param(name: string): Tensor;
  /** The LM head weight [vocab, hidden] (the embedding when tied). */
  lmHead(): Tensor;
  /** Final hidden states [batch, seq, hidden] (after the last norm). */
  hidden(batch: TokenBatch): Tensor;
  /** Hidden states of new tokens continuing the sequences in `cache` (made by this model's newCache), which they extend. */
  hiddenCached(batch: TokenBatch, cache: ModelCache): Tensor;
  newCache(batch: number, capacity: number, padLeft?: Int32Array): ModelCache;
  /**
   * Hidden states [rows, seq, hidden] of `rows` (the tokens after their prefixes,
   * right-padded), each continuing its prefix in `prefixes`, which run once; taped
   * like `hidden`.
   */
  hiddenAfterPrefixes(prefixes: PrefixBatch, rows: PrefixedRows): Tensor;
  /** Full logits [batch, seq, vocab]; for small vocabularies and tests. */
  logits(batch: TokenBatch): Tensor;
  parameters(): Tensor[];
}
