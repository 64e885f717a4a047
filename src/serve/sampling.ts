// The sampling fields /v1/completions and /v1/chat/completions share (docs/PROTOCOLS.md
// section 5), read into one engine request per choice, and the streaming options.

import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { GenerationRequest } from '../engines/engine.ts';
import { deriveSeed } from '../util/random.ts';
import { boolField, intField, neutralOnly, numberField, stringList, tokenIds, type Body } from './fields.ts';
import { ApiError } from './http.ts';

export interface RequestLimits {
  vocab: number;
  maxModelLen: number;
  /** Choices (prompts x n) one request may ask for. */
  maxChoices: number;
  /** Top log-probs one token may ask for (vLLM's --max-logprobs, 20 by default). */
  maxLogprobs: number;
}

export interface StreamOptions {
  /** A last chunk with the request's usage and no choices. */
  includeUsage: boolean;
  /** Usage so far on every chunk. */
  continuousUsage: boolean;
}

/** What both endpoints read from a request besides the prompt. */
export interface SamplingRequest {
  n: number;
  /** One engine request per choice: prompt i, sample j at i * n + j. */
  requests: GenerationRequest[];
  /** Stop strings, for holding back streamed text that may turn out to be one. */
  stops: string[];
  includeStop: boolean;
  skipSpecial: boolean;
  /** Top log-probs per token (0: only the sampled token's); null: no log-probs. */
  logprobs: number | null;
  tokensAsIds: boolean;
  returnTokenIds: boolean;
  stream: StreamOptions | null;
}

export function needTokenizer(tok: Tokenizer | null, what: string): Tokenizer {
  if (!tok) throw new ApiError(400, `${what} needs a tokenizer, and this server has none loaded (send token ids, or start it with --tokenizer)`);
  return tok;
}

/** Fields we do not implement, accepted only at the value that means "off". */
function neutralFields(body: Body): void {
  neutralOnly(body, 'presence_penalty', (v) => v === 0, 'only 0');
  neutralOnly(body, 'frequency_penalty', (v) => v === 0, 'only 0');
  neutralOnly(body, 'repetition_penalty', (v) => v === 1, 'only 1');
  neutralOnly(body, 'min_p', (v) => v === 0, 'only 0');
  neutralOnly(body, 'min_tokens', (v) => v === 0, 'only 0');
  neutralOnly(body, 'use_beam_search', (v) => v === false, 'no beam search');
  neutralOnly(body, 'logit_bias', (v) => typeof v === 'object' && Object.keys(v as object).length === 0, 'no biases');
}

function streamOptions(body: Body): StreamOptions | null {
  const stream = boolField(body, 'stream', false);
  const o = body.stream_options;
  if (o === undefined || o === null) return stream ? { includeUsage: false, continuousUsage: false } : null;
  if (typeof o !== 'object' || Array.isArray(o)) throw new ApiError(400, 'field "stream_options" must be an object', 'stream_options');
  if (!stream) throw new ApiError(400, 'field "stream_options" is only allowed with "stream": true', 'stream_options');
  const opts = o as Body;
  return { includeUsage: boolField(opts, 'include_usage', false), continuousUsage: boolField(opts, 'continuous_usage_stats', false) };
}

/** How an endpoint differs in the shared fields. */
export interface EndpointFields {
  /** The field of the token budget (chat also takes max_completion_tokens). */
  maxTokensField: string;
  /** The budget when the request gives none; null: up to the context length. */
  defaultMaxTokens: number | null;
  /** Top log-probs per token as the endpoint's own fields ask (0: the sampled token's only); null: none. */
  logprobs: number | null;
}

/** The engine requests for `prompts` (already tokenised and checked) with the body's sampling fields. */
export function readSampling(body: Body, prompts: readonly number[][], tok: Tokenizer | null, limits: RequestLimits, fields: EndpointFields): SamplingRequest {
  const { maxTokensField, logprobs } = fields;
  neutralFields(body);
  const n = intField(body, 'n', 1, 1)!;
  const bestOf = intField(body, 'best_of', n, 1);
  if (bestOf !== n) throw new ApiError(400, 'field "best_of" is not supported (leave it out or equal to n)', 'best_of');
  if (prompts.length * n > limits.maxChoices) throw new ApiError(400, `${prompts.length} prompts x n = ${n} exceed the ${limits.maxChoices} choices one request may ask for`, 'n');
  const longest = Math.max(...prompts.map((p) => p.length));
  if (longest > limits.maxModelLen) throw new ApiError(400, `a prompt of ${longest} tokens exceeds the model's context of ${limits.maxModelLen}`, 'prompt');
  const maxTokens = body[maxTokensField] === undefined ? fields.defaultMaxTokens : intField(body, maxTokensField, null, 0);
  const temperature = numberField(body, 'temperature', 1, (x) => x >= 0, 'a number >= 0');
  const topP = numberField(body, 'top_p', 1, (x) => x > 0 && x <= 1, 'a number in (0, 1]');
  const topK = intField(body, 'top_k', -1, -1)!;
  const seed = intField(body, 'seed', null);
  const stop = stringList(body, 'stop');
  if (stop.length) needTokenizer(tok, 'field "stop"');
  const stopTokenIds = body.stop_token_ids == null ? [] : tokenIds(body.stop_token_ids, 'stop_token_ids', limits.vocab);
  const skipSpecial = boolField(body, 'skip_special_tokens', true);
  const params = {
    temperature, topP, topK, stop, stopTokenIds, skipSpecialTokens: skipSpecial,
    ignoreEos: boolField(body, 'ignore_eos', false),
    ...(logprobs ? { logprobs } : {}),
  };
  const requests: GenerationRequest[] = [];
  prompts.forEach((promptIds, i) => {
    const left = limits.maxModelLen - promptIds.length;
    const want = maxTokens ?? left;
    if (want > left) {
      throw new ApiError(400, `prompt ${i} has ${promptIds.length} tokens and ${maxTokensField} is ${want}: more than the model's context of ${limits.maxModelLen} tokens`, maxTokensField);
    }
    for (let j = 0; j < n; j++) {
      requests.push({ promptIds, params: { ...params, maxTokens: want, ...(seed === null ? {} : { seed: deriveSeed(seed, j) }) } });
    }
  });
  return {
    n, requests, stops: stop, skipSpecial, logprobs,
    includeStop: boolField(body, 'include_stop_str_in_output', false),
    tokensAsIds: boolField(body, 'return_tokens_as_token_ids', false),
    returnTokenIds: boolField(body, 'return_token_ids', false),
    stream: streamOptions(body),
  };
}

/** A top log-probs count in [0, limit] from `field`; null when absent. */
export function logprobsCount(body: Body, field: string, limit: number): number | null {
  const n = intField(body, field, null, 0);
  if (n !== null && n > limit) throw new ApiError(400, `field "${field}" is ${n}, more than the ${limit} top log-probs this server returns (--max-logprobs)`, field);
  return n;
}
