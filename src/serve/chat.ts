// POST /v1/chat/completions: messages rendered by the tokenizer's chat template into
// one prompt, sampled like a completion, and answered in OpenAI's chat shape (whole or
// as chat.completion.chunk events). Text only: tool calls and other content parts are
// refused rather than silently ignored.

import type { ChatMessage, ChatTextPart, Tokenizer } from '../tokenizer/tokenizer.ts';
import type { GenerationResult } from '../engines/engine.ts';
import { boolField, neutralOnly, stringField, type Body } from './fields.ts';
import { ApiError } from './http.ts';
import { logprobsCount, needTokenizer, readSampling, type RequestLimits, type SamplingRequest } from './sampling.ts';
import { chatLogprobContent, choiceText, scoredTokens, type ScoredToken, type TokenNaming } from './text.ts';

export interface ChatRequest extends SamplingRequest {
  model: string | undefined;
  promptIds: number[];
}

/**
 * A message's content as vLLM hands it to the template: text parts joined by newlines
 * for a template that reads content as one string, the parts themselves for one that
 * loops over them (Tokenizer.contentFormat).
 */
function messageContent(content: unknown, at: string, format: Tokenizer['contentFormat']): string | ChatTextPart[] {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    const parts = content.map((part, j): ChatTextPart => {
      if (part?.type === 'text' && typeof part.text === 'string') return { type: 'text', text: part.text };
      throw new ApiError(400, `${at}.content[${j}]: only {"type": "text", "text": string} parts are supported, got type ${JSON.stringify(part?.type)}`, 'messages');
    });
    return format === 'openai' ? parts : parts.map((p) => p.text).join('\n');
  }
  throw new ApiError(400, `${at}.content must be a string, null, or a list of text parts`, 'messages');
}

function readMessages(v: unknown, format: Tokenizer['contentFormat']): ChatMessage[] {
  if (!Array.isArray(v) || v.length === 0) throw new ApiError(400, 'field "messages" must be a non-empty list of {"role", "content"}', 'messages');
  return v.map((m, i) => {
    const at = `messages[${i}]`;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw new ApiError(400, `${at} must be an object`, 'messages');
    const { role, content, ...rest } = m as Record<string, unknown>;
    if (typeof role !== 'string' || role === '') throw new ApiError(400, `${at}.role must be a non-empty string`, 'messages');
    if (Array.isArray(rest.tool_calls) && rest.tool_calls.length) throw new ApiError(400, `${at}: tool calls are not supported by this server`, 'messages');
    return { ...rest, role, content: messageContent(content, at, format) };
  });
}

function enableThinking(body: Body): boolean | undefined {
  const kw = body.chat_template_kwargs;
  if (kw === undefined || kw === null) return undefined;
  if (typeof kw !== 'object' || Array.isArray(kw)) throw new ApiError(400, 'field "chat_template_kwargs" must be an object', 'chat_template_kwargs');
  const unknown = Object.keys(kw).filter((k) => k !== 'enable_thinking');
  if (unknown.length) throw new ApiError(400, `field "chat_template_kwargs": only "enable_thinking" is supported, got ${unknown.map((k) => JSON.stringify(k)).join(', ')}`, 'chat_template_kwargs');
  const v = (kw as Body).enable_thinking;
  if (v !== undefined && typeof v !== 'boolean') throw new ApiError(400, 'field "chat_template_kwargs.enable_thinking" must be true or false', 'chat_template_kwargs');
  return v as boolean | undefined;
}

function render(tok: Tokenizer, messages: ChatMessage[], addGenerationPrompt: boolean, thinking: boolean | undefined): number[] {
  try {
    return tok.applyChatTemplate(messages, { tokenize: true, addGenerationPrompt, ...(thinking === undefined ? {} : { enableThinking: thinking }) });
  } catch (e) {
    throw new ApiError(400, `the chat template could not render these messages: ${(e as Error).message}`, 'messages');
  }
}

export function parseChat(body: Body, tok: Tokenizer | null, limits: RequestLimits): ChatRequest {
  const t = needTokenizer(tok, 'a chat request');
  neutralOnly(body, 'tools', (v) => Array.isArray(v) && v.length === 0, 'no tool calling');
  neutralOnly(body, 'tool_choice', (v) => v === 'none', 'no tool calling');
  neutralOnly(body, 'response_format', (v) => typeof v === 'object' && (v as Body).type === 'text', 'only {"type": "text"}');
  neutralOnly(body, 'echo', (v) => v === false, 'no echo');
  neutralOnly(body, 'continue_final_message', (v) => v === false, 'no continuation of the last message');
  neutralOnly(body, 'prompt_logprobs', () => false, 'no prompt log-probs in chat; use /v1/completions');
  const model = stringField(body, 'model');
  const promptIds = render(t, readMessages(body.messages, t.contentFormat), boolField(body, 'add_generation_prompt', true), enableThinking(body));
  if (promptIds.length === 0) throw new ApiError(400, 'the chat template rendered these messages to no tokens', 'messages');
  const wantLogprobs = boolField(body, 'logprobs', false);
  const top = logprobsCount(body, 'top_logprobs', limits.maxLogprobs);
  if (top && !wantLogprobs) throw new ApiError(400, 'field "top_logprobs" needs "logprobs": true', 'top_logprobs');
  const maxTokensField = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  const sampling = readSampling(body, [promptIds], t, limits, { maxTokensField, defaultMaxTokens: null, logprobs: wantLogprobs ? (top ?? 0) : null });
  return { ...sampling, model, promptIds };
}

const assistant = (content: string) => ({ role: 'assistant', content, tool_calls: [] });

export function chatResponse(c: ChatRequest, id: string, modelName: string, results: readonly GenerationResult[], tok: Tokenizer | null): Record<string, unknown> {
  let completionTokens = 0;
  const choices = results.map((r, index) => {
    completionTokens += r.tokenIds.length;
    const choice: Record<string, unknown> = {
      index,
      message: assistant(choiceText(r, c.includeStop, c.skipSpecial, tok)),
      logprobs: c.logprobs === null ? null : { content: chatLogprobContent(scoredTokens(r), { tok, tokensAsIds: c.tokensAsIds }) },
      finish_reason: r.finishReason,
      stop_reason: r.stopReason ?? null,
    };
    if (c.returnTokenIds) choice.token_ids = r.tokenIds;
    return choice;
  });
  const promptTokens = c.promptIds.length;
  const out: Record<string, unknown> = {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: modelName,
    choices,
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    prompt_logprobs: null,
  };
  if (c.returnTokenIds) out.prompt_token_ids = c.promptIds;
  return out;
}

/** The chunks of a chat stream: a role delta opens each choice, content deltas follow. */
export class ChatChunks {
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly naming: TokenNaming;

  constructor(
    private readonly c: ChatRequest,
    private readonly id: string,
    private readonly modelName: string,
    tok: Tokenizer | null,
  ) {
    this.naming = { tok, tokensAsIds: c.tokensAsIds };
  }

  private chunk(choices: Record<string, unknown>[]): Record<string, unknown> {
    return { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.modelName, choices };
  }

  start(index: number): Record<string, unknown> {
    const chunk = this.chunk([{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
    if (this.c.returnTokenIds) chunk.prompt_token_ids = this.c.promptIds;
    return chunk;
  }

  token(index: number, text: string, token: ScoredToken, result?: GenerationResult): Record<string, unknown> {
    const choice: Record<string, unknown> = {
      index,
      delta: text || !result ? { content: text } : {},
      logprobs: this.c.logprobs === null ? null : { content: chatLogprobContent([token], this.naming) },
      finish_reason: result?.finishReason ?? null,
    };
    if (result) choice.stop_reason = result.stopReason ?? null;
    if (this.c.returnTokenIds) choice.token_ids = [token.id];
    return this.chunk([choice]);
  }

  empty(index: number, result: GenerationResult): Record<string, unknown> {
    return this.chunk([{ index, delta: {}, logprobs: null, finish_reason: result.finishReason, stop_reason: result.stopReason ?? null }]);
  }

  usage(promptTokens: number, completionTokens: number): Record<string, unknown> {
    return { ...this.chunk([]), usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens } };
  }
}
