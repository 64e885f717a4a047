// POST /v1/completions: the request read into engine requests, and the engine's results
// written back in vLLM's response shape, whole or as stream chunks.

import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { GREEDY_BELOW } from '../tensor/ops/sampling.ts';
import type { GenerationResult } from '../engines/engine.ts';
import type { PromptTokenStats } from '../engines/prompt_logprobs.ts';
import { boolField, neutralOnly, stringField, tokenIds, type Body } from './fields.ts';
import { ApiError } from './http.ts';
import { logprobsCount, needTokenizer, readSampling, type RequestLimits, type SamplingRequest } from './sampling.ts';
import { choiceText, completionLogprobs, jsonLogprob, scoredTokens, tokenName, type ScoredToken, type TokenNaming } from './text.ts';

export interface CompletionRequest extends SamplingRequest {
  model: string | undefined;
  prompts: number[][];
  echo: boolean;
  /** Whether the prompt tokens' log-probs are computed (prompt_logprobs, or echo with logprobs). */
  promptLogprobs: boolean;
  /** Most likely tokens listed at each prompt position: prompt_logprobs, else echo's logprobs (vLLM takes one for the other). */
  promptTop: number;
  /** Temperature for prompt log-probs: the request's, or 1 when it asks for greedy. */
  promptTemperature: number;
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

export function parseCompletion(body: Body, tok: Tokenizer | null, limits: RequestLimits): CompletionRequest {
  neutralOnly(body, 'suffix', (v) => v === '', 'no suffix');
  const model = stringField(body, 'model');
  if (body.prompt === undefined) throw new ApiError(400, 'field "prompt" is required', 'prompt');
  const prompts = readPrompts(body.prompt, tok, limits.vocab);
  prompts.forEach((p, i) => {
    if (p.length === 0) throw new ApiError(400, `prompt ${i} is empty`, 'prompt');
  });
  const logprobs = logprobsCount(body, 'logprobs', limits.maxLogprobs);
  const promptLogprobs = logprobsCount(body, 'prompt_logprobs', limits.maxLogprobs);
  const echo = boolField(body, 'echo', false);
  // vLLM's default is 16 new tokens; an explicit null means up to the context length.
  const sampling = readSampling(body, prompts, tok, limits, { maxTokensField: 'max_tokens', defaultMaxTokens: 16, logprobs });
  if (sampling.stream && promptLogprobs !== null) throw new ApiError(400, 'field "prompt_logprobs" is not available when streaming', 'prompt_logprobs');
  const temperature = sampling.requests[0].params.temperature;
  return {
    ...sampling, model, prompts, echo,
    promptLogprobs: promptLogprobs !== null || (echo && logprobs !== null),
    promptTop: promptLogprobs ?? (echo ? (logprobs ?? 0) : 0),
    promptTemperature: temperature >= GREEDY_BELOW ? temperature : 1,
  };
}

type PromptLogprobEntry = Record<string, { logprob: number; rank: number; decoded_token: string }> | null;

/** vLLM's prompt_logprobs: per position the prompt's own token, then the most likely ones (ranks 1..N). */
function promptLogprobEntries(ids: readonly number[], stats: PromptTokenStats, naming: TokenNaming): PromptLogprobEntry[] {
  return [null, ...ids.slice(1).map((id, i) => {
    const entry: NonNullable<PromptLogprobEntry> = { [String(id)]: { logprob: jsonLogprob(stats.logprobs[i]), rank: stats.ranks[i], decoded_token: tokenName(id, naming) } };
    stats.top?.[i].forEach((t, j) => (entry[String(t.id)] ??= { logprob: jsonLogprob(t.logprob), rank: j + 1, decoded_token: tokenName(t.id, naming) }));
    return entry;
  })];
}

/** The echoed prompt's tokens for a logprobs object: the first has no log-prob; the rest their top lists when asked for. */
function echoedTokens(promptIds: readonly number[], stats: PromptTokenStats): ({ id: number; logprob: null } | ScoredToken)[] {
  return promptIds.map((id, i) => (i === 0 ? { id, logprob: null } : { id, logprob: stats.logprobs[i - 1], top: stats.top?.[i - 1] }));
}

function echoText(c: CompletionRequest, promptIds: readonly number[], tok: Tokenizer | null): string {
  return tok ? tok.decode(promptIds, { skipSpecialTokens: c.skipSpecial }) : '';
}

const usage = (promptTokens: number, completionTokens: number) => ({
  prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens,
});

export function completionResponse(
  c: CompletionRequest, id: string, modelName: string, results: readonly GenerationResult[], promptStats: readonly PromptTokenStats[] | null, tok: Tokenizer | null,
): Record<string, unknown> {
  const naming = { tok, tokensAsIds: c.tokensAsIds };
  let completionTokens = 0;
  const choices = results.map((r, index) => {
    const p = Math.floor(index / c.n);
    const promptIds = c.prompts[p];
    completionTokens += r.tokenIds.length;
    const stats = promptStats?.[p] ?? null;
    const prefix = c.echo ? echoText(c, promptIds, tok) : '';
    let logprobs: Record<string, unknown> | null = null;
    if (c.logprobs !== null) logprobs = completionLogprobs([...(c.echo ? echoedTokens(promptIds, stats!) : []), ...scoredTokens(r)], naming, 0);
    const choice: Record<string, unknown> = {
      index,
      text: prefix + choiceText(r, c.includeStop, c.skipSpecial, tok),
      logprobs,
      finish_reason: r.finishReason,
      stop_reason: r.stopReason ?? null,
      prompt_logprobs: stats ? promptLogprobEntries(promptIds, stats, naming) : null,
    };
    if (c.returnTokenIds) {
      choice.prompt_token_ids = promptIds;
      choice.token_ids = r.tokenIds;
    }
    return choice;
  });
  return {
    id,
    object: 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model: modelName,
    choices,
    usage: usage(c.prompts.reduce((s, p) => s + p.length, 0), completionTokens),
  };
}

/** The chunks of a completion stream; each choice's text arrives as deltas. */
export class CompletionChunks {
  private readonly created = Math.floor(Date.now() / 1000);
  /** Where each choice's next token starts in its text (logprobs.text_offset). */
  private readonly offsets: number[];
  private readonly naming: TokenNaming;

  constructor(
    private readonly c: CompletionRequest,
    private readonly id: string,
    private readonly modelName: string,
    private readonly tok: Tokenizer | null,
  ) {
    this.offsets = c.requests.map(() => 0);
    this.naming = { tok, tokensAsIds: c.tokensAsIds };
  }

  private chunk(choices: Record<string, unknown>[]): Record<string, unknown> {
    return { id: this.id, object: 'text_completion', created: this.created, model: this.modelName, choices };
  }

  /** The echoed prompt, first thing of each choice (none without echo). */
  start(index: number, stats: PromptTokenStats | null): Record<string, unknown> | null {
    const c = this.c;
    const promptIds = c.prompts[Math.floor(index / c.n)];
    if (!c.echo && !c.returnTokenIds) return null;
    const choice: Record<string, unknown> = { index, text: c.echo ? echoText(c, promptIds, this.tok) : '', logprobs: null, finish_reason: null, stop_reason: null };
    if (c.echo && c.logprobs !== null) {
      const lp = completionLogprobs(echoedTokens(promptIds, stats!), this.naming, 0);
      this.offsets[index] = lp.tokens.reduce((s, t) => s + t.length, 0);
      choice.logprobs = lp;
    }
    if (c.returnTokenIds) {
      choice.prompt_token_ids = promptIds;
      choice.token_ids = [];
    }
    return this.chunk([choice]);
  }

  /** A token's delta of choice `index`; `result` on its last token. */
  token(index: number, text: string, token: ScoredToken, result?: GenerationResult): Record<string, unknown> {
    const c = this.c;
    const choice: Record<string, unknown> = { index, text, logprobs: null, finish_reason: result?.finishReason ?? null, stop_reason: result?.stopReason ?? null };
    if (c.logprobs !== null) {
      const lp = completionLogprobs([token], this.naming, this.offsets[index]);
      this.offsets[index] += lp.tokens[0].length;
      choice.logprobs = lp;
    }
    if (c.returnTokenIds) choice.token_ids = [token.id];
    return this.chunk([choice]);
  }

  /** The end of a choice that generated nothing (max_tokens 0). */
  empty(index: number, result: GenerationResult): Record<string, unknown> {
    const choice: Record<string, unknown> = { index, text: '', logprobs: null, finish_reason: result.finishReason, stop_reason: result.stopReason ?? null };
    if (this.c.returnTokenIds) choice.token_ids = [];
    return this.chunk([choice]);
  }

  usage(promptTokens: number, completionTokens: number): Record<string, unknown> {
    return { ...this.chunk([]), usage: usage(promptTokens, completionTokens) };
  }
}
