// The generation engine interface the agent loop and the trainer use. Two
// implementations: the local WebGPU sampler (engines/local_engine.ts) and the
// HTTP client for vLLM-compatible servers (engines/http_engine.ts). Token ids go in
// and come out; text is never re-tokenised.

import type { EnvInfo } from '../envs/types.ts';

export interface SamplingParams {
  maxTokens: number;
  /** 0 means greedy. */
  temperature: number;
  /** 1 disables nucleus filtering. */
  topP: number;
  /** 0 or -1 disables top-k filtering. */
  topK: number;
  /** Per-request seed: the same seed, prompt and weights give the same tokens. */
  seed?: number;
  /** Stop strings: generation ends after the first token whose text completes one (kept in the output). */
  stop?: string[];
  /** Stop token ids (the tokenizer's EOS ids are added by the engine unless ignoreEos). */
  stopTokenIds?: number[];
  ignoreEos?: boolean;
  /** Leave special tokens out of `text` (vLLM's skip_special_tokens); default false, so text keeps e.g. <|im_end|>. */
  skipSpecialTokens?: boolean;
  /** Also list the N most likely tokens of every step (vLLM's logprobs: N); default 0. */
  logprobs?: number;
}

/** One of a step's most likely tokens, with its log-prob under the sampling distribution. */
export interface TopLogprob {
  id: number;
  logprob: number;
}

/**
 * What the agent loop knows about the turn a request belongs to. Model engines ignore
 * it (and never send it anywhere); the expert engine (engines/expert_engine.ts) acts
 * on it, since its policy reads the environment state rather than the prompt.
 */
export interface GenerationContext {
  /** Environment kind (household, shop, search, or a remote server's name). */
  env: string;
  trajectoryId: string;
  /** 0-based turn index within the episode. */
  turn: number;
  task: string;
  taskType: string;
  observation: string;
  admissibleActions: readonly string[];
  /** The environment's info from its last answer (reset or step), e.g. expert_action. */
  info: EnvInfo;
}

export interface GenerationRequest {
  promptIds: readonly number[];
  params: SamplingParams;
  context?: GenerationContext;
}

export interface GenerationResult {
  tokenIds: number[];
  /**
   * Log-prob of each generated token under the distribution it was sampled from:
   * log softmax(logits / temperature) after no filtering (vLLM's processed_logprobs
   * at temperature T with top-p/top-k off); at temperature 0, under temperature 1.
   * Empty when the engine has no distribution over tokens to report (the expert).
   */
  logprobs: number[];
  finishReason: 'stop' | 'length';
  /** What stopped a 'stop' finish: the stop string or stop token id; absent for EOS (vLLM's stop_reason). */
  stopReason?: string | number;
  text: string;
  /** With params.logprobs N > 0: each step's N most likely tokens, most likely first (ties by smaller id). */
  topLogprobs?: TopLogprob[][];
  /** The server that generated it, for engines with several (src/fleet/server_pool.ts). */
  server?: string;
  /** The weights' version (updates they have had) when the engine serves a run's versions. */
  version?: number;
  /**
   * Set instead of a generation when the server holding the request's episode was lost
   * (stopped answering, or missed a weight sync): the episode starts over, and the
   * engine runs it elsewhere. tokenIds and logprobs are then empty.
   */
  lost?: string;
}

export interface ScoreRequest {
  promptIds: readonly number[];
  completionIds: readonly number[];
}

export interface Engine {
  readonly name: string;
  /** The longest prompt plus completion the engine serves, where it knows it (the model's context). */
  readonly contextLength?: number;
  /** Generates for every request (batched as the engine sees fit); results in request order. */
  generate(requests: readonly GenerationRequest[], opts?: { model?: string }): Promise<GenerationResult[]>;
  /** Log-probs (temperature 1) of each completion token after its prompt. */
  score(requests: readonly ScoreRequest[], opts?: { model?: string; temperature?: number }): Promise<number[][]>;
  close?(): Promise<void> | void;
}

/** Weight sync for engines that serve adapters by name (both engines implement it). */
export interface WeightSync {
  /** Loads a PEFT adapter directory under a new name; generate with { model: name }. */
  loadLoraAdapter(name: string, path: string): Promise<void>;
  unloadLoraAdapter(name: string): Promise<void>;
  /** Replaces the base weights with a full Hugging Face checkpoint directory. */
  reloadWeights(path: string): Promise<void>;
}
