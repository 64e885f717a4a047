// POST /v1/completions: the request fields of PROTOCOLS.md section 5 read into engine
// requests, and the engine's results written back in vLLM's response shape.

import { GREEDY_BELOW } from '../tensor/ops/sampling.ts';
import type { Tokenizer } from '../models/tokenizer.ts';
import type { GenerationRequest, GenerationResult } from './engine.ts';
import type { PromptTokenStats } from './prompt_logprobs.ts';
import { deriveSeed } from './rng.ts';
import { boolField, intField, neutralOnly, numberField, stringField, stringList, tokenIds, type Body } from './server_fields.ts';
import { ApiError } from './server_http.ts';

export interface CompletionRequest {
  model: string | undefined;
  prompts: number[][];
  n: number;
  /** One engine request per choice: prompt i, sample j at i * n + j. */
  requests: GenerationRequest[];
  includeStop: boolean;
  logprobs: boolean;
  echo: boolean;
  /** Whether the prompt tokens' log-probs are computed (prompt_logprobs, or echo with logprobs). */
  promptLogprobs: boolean;
  /** Temperature for prompt log-probs: the request's, or 1 when it asks for greedy. */
  promptTemperature: number;
  returnTokenIds: boolean;
  tokensAsIds: boolean;
  skipSpecial: boolean;
}

export interface CompletionLimits {
  vocab: number;
  maxModelLen: number;
  /** Choices (prompts x n) one request may ask for. */
  maxChoices: number;
}

function needTokenizer(tok: Tokenizer | null, what: string): Tokenizer {
  if (!tok) throw new ApiError(400, `${what} needs a tokenizer, and this server has none loaded (send token ids, or start it with --tokenizer)`);
  return tok;
}

function readPrompts(v: unknown, tok: Tokenizer | null, vocab: number): number[][] {
  if (typeof v === 'string') return [needTokenizer(tok, 'a text prompt').encode(v)];
  if (!Array.isArray(v) || v.length === 0) throw new ApiError(400, 'field "prompt" must be a string, a list of token ids, or a non-empty list of either', 'prompt');
  if (v.every((x) => typeof x === 'number')) return [tokenIds(v, 'prompt', vocab)];
  return v.map((p, i) => {
    if (typeof p === 'string') return needTokenizer(tok, 'a text prompt').encode(p);
    if (Array.isArray(p)) return tokenIds(p, `prompt[${i}]`, vocab);
    throw new ApiError(400, `prompt[${i}] must be a string or a list of token ids`, 'prompt');
  });
}

export function parseCompletion(body: Body, tok: Tokenizer | null, limits: CompletionLimits): CompletionRequest {
  if (body.stream === true) throw new ApiError(400, 'streaming is not supported by this server; send "stream": false', 'stream');
  neutralOnly(body, 'suffix', (v) => v === '', 'no suffix');
  neutralOnly(body, 'presence_penalty', (v) => v === 0, 'only 0');
  neutralOnly(body, 'frequency_penalty', (v) => v === 0, 'only 0');
  neutralOnly(body, 'repetition_penalty', (v) => v === 1, 'only 1');
  neutralOnly(body, 'min_p', (v) => v === 0, 'only 0');
  neutralOnly(body, 'min_tokens', (v) => v === 0, 'only 0');
  neutralOnly(body, 'use_beam_search', (v) => v === false, 'no beam search');
  neutralOnly(body, 'logit_bias', (v) => typeof v === 'object' && Object.keys(v as object).length === 0, 'no biases');
  const model = stringField(body, 'model');
  if (body.prompt === undefined) throw new ApiError(400, 'field "prompt" is required', 'prompt');
  const prompts = readPrompts(body.prompt, tok, limits.vocab);
  prompts.forEach((p, i) => {
    if (p.length === 0) throw new ApiError(400, `prompt ${i} is empty`, 'prompt');
  });
  const n = intField(body, 'n', 1, 1)!;
  const bestOf = intField(body, 'best_of', n, 1);
  if (bestOf !== n) throw new ApiError(400, 'field "best_of" is not supported (leave it out or equal to n)', 'best_of');
  if (prompts.length * n > limits.maxChoices) throw new ApiError(400, `${prompts.length} prompts x n = ${n} exceed the ${limits.maxChoices} choices one request may ask for`, 'n');
  const longest = Math.max(...prompts.map((p) => p.length));
  if (longest > limits.maxModelLen) throw new ApiError(400, `a prompt of ${longest} tokens exceeds the model's context of ${limits.maxModelLen}`, 'prompt');
  // vLLM's default is 16 new tokens; an explicit null means up to the context length.
  const maxTokens = body.max_tokens === undefined ? 16 : intField(body, 'max_tokens', null, 0);
  const temperature = numberField(body, 'temperature', 1, (x) => x >= 0, 'a number >= 0');
  const topP = numberField(body, 'top_p', 1, (x) => x > 0 && x <= 1, 'a number in (0, 1]');
  const topK = intField(body, 'top_k', -1, -1)!;
  const seed = intField(body, 'seed', null);
  const stop = stringList(body, 'stop');
  if (stop.length) needTokenizer(tok, 'field "stop"');
  const stopTokenIds = body.stop_token_ids == null ? [] : tokenIds(body.stop_token_ids, 'stop_token_ids', limits.vocab);
  const logprobs = intField(body, 'logprobs', null, 0);
  if (logprobs !== null && logprobs > 0) throw new ApiError(400, 'field "logprobs": only 0 (the sampled tokens\' own log-probs) is supported', 'logprobs');
  const promptLogprobs = intField(body, 'prompt_logprobs', null, 0);
  if (promptLogprobs !== null && promptLogprobs > 0) throw new ApiError(400, 'field "prompt_logprobs": only 0 (the prompt tokens\' own log-probs) is supported', 'prompt_logprobs');
  const echo = boolField(body, 'echo', false);
  const skipSpecial = boolField(body, 'skip_special_tokens', true);
  const params = {
    temperature, topP, topK, stop, stopTokenIds, skipSpecialTokens: skipSpecial,
    ignoreEos: boolField(body, 'ignore_eos', false),
  };
  const requests: GenerationRequest[] = [];
  prompts.forEach((promptIds, i) => {
    const left = limits.maxModelLen - promptIds.length;
    const want = maxTokens ?? left;
    if (want > left) {
      throw new ApiError(400, `prompt ${i} has ${promptIds.length} tokens and max_tokens is ${want}: more than the model's context of ${limits.maxModelLen} tokens`, 'max_tokens');
    }
    for (let j = 0; j < n; j++) {
      requests.push({ promptIds, params: { ...params, maxTokens: want, ...(seed === null ? {} : { seed: deriveSeed(seed, j) }) } });
    }
  });
  return {
    model, prompts, n, requests, echo,
    includeStop: boolField(body, 'include_stop_str_in_output', false),
    logprobs: logprobs !== null,
    promptLogprobs: promptLogprobs !== null || (echo && logprobs !== null),
    promptTemperature: temperature >= GREEDY_BELOW ? temperature : 1,
    returnTokenIds: boolField(body, 'return_token_ids', false),
    tokensAsIds: boolField(body, 'return_tokens_as_token_ids', false),
    skipSpecial,
  };
}

/** The choice text vLLM gives: stop strings and stop tokens drop out unless include_stop_str_in_output. */
function choiceText(c: CompletionRequest, r: GenerationResult, tok: Tokenizer | null): string {
  if (!tok) return '';
  if (c.includeStop || r.finishReason !== 'stop') return r.text;
  if (typeof r.stopReason === 'string') return r.text.slice(0, r.text.length - r.stopReason.length);
  return tok.decode(r.tokenIds.slice(0, -1), { skipSpecialTokens: c.skipSpecial });
}

function tokenName(id: number, c: CompletionRequest, tok: Tokenizer | null): string {
  return c.tokensAsIds || !tok ? `token_id:${id}` : tok.decode([id], { skipSpecialTokens: false });
}

type PromptLogprobEntry = Record<string, { logprob: number; rank: number; decoded_token: string }> | null;

function promptLogprobEntries(ids: readonly number[], stats: PromptTokenStats, c: CompletionRequest, tok: Tokenizer | null): PromptLogprobEntry[] {
  return [null, ...ids.slice(1).map((id, i) => ({ [String(id)]: { logprob: stats.logprobs[i], rank: stats.ranks[i], decoded_token: tokenName(id, c, tok) } }))];
}

export function completionResponse(
  c: CompletionRequest, modelName: string, results: readonly GenerationResult[], promptStats: readonly PromptTokenStats[] | null, tok: Tokenizer | null,
): Record<string, unknown> {
  let completionTokens = 0;
  const choices = results.map((r, index) => {
    const p = Math.floor(index / c.n);
    const promptIds = c.prompts[p];
    completionTokens += r.tokenIds.length;
    const stats = promptStats?.[p] ?? null;
    let text = choiceText(c, r, tok);
    if (c.echo && tok) text = tok.decode(promptIds, { skipSpecialTokens: c.skipSpecial }) + text;
    let logprobs: Record<string, unknown> | null = null;
    if (c.logprobs) {
      const ids = c.echo ? [...promptIds, ...r.tokenIds] : r.tokenIds;
      const lps = c.echo ? [null, ...Array.from(stats!.logprobs), ...r.logprobs] : r.logprobs;
      logprobs = { tokens: ids.map((id) => tokenName(id, c, tok)), token_logprobs: lps, top_logprobs: null };
    }
    const choice: Record<string, unknown> = {
      index,
      text,
      logprobs,
      finish_reason: r.finishReason,
      stop_reason: r.stopReason ?? null,
      prompt_logprobs: stats ? promptLogprobEntries(promptIds, stats, c, tok) : null,
    };
    if (c.returnTokenIds) {
      choice.prompt_token_ids = promptIds;
      choice.token_ids = r.tokenIds;
    }
    return choice;
  });
  const promptTokens = c.prompts.reduce((s, p) => s + p.length, 0);
  return {
    id: `cmpl-${crypto.randomUUID().replaceAll('-', '')}`,
    object: 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model: modelName,
    choices,
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}
