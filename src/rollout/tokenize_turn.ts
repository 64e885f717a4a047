// A turn's prompt as the model sees it, and responses cut at a token boundary. The
// prompt is one user message in the tokenizer's own chat template with the generation
// prompt on and enable_thinking as the run's thinking mode sets it (templates without
// the switch ignore it). Ids come from the real tokenizer: a byte-level stand-in would
// train a model on ids it never reads.

import type { ChatMessage, ChatOptions, Tokenizer } from '../tokenizer/tokenizer.ts';

export interface TurnPromptIds {
  ids: number[];
  /** Length of the templated prompt before truncation. */
  fullLength: number;
  /** The prompt was longer than the budget and lost its start. */
  truncated: boolean;
}

/** A template's rendering that does not continue the turn's prompt, so no response ids can be read off it. */
export class TemplateTurnError extends Error {
  override name = 'TemplateTurnError';
}

/** The thinking switch as chat options: left out when undefined, so the template's default applies. */
function thinkingOption(enableThinking: boolean | undefined): ChatOptions {
  return enableThinking === undefined ? {} : { enableThinking };
}

/** The templated prompt text for one user message; `enableThinking` undefined leaves the switch to the template. */
export function turnPromptText(tokenizer: Tokenizer, user: string, enableThinking: boolean | undefined): string {
  return tokenizer.applyChatTemplate([{ role: 'user', content: user }], { addGenerationPrompt: true, ...thinkingOption(enableThinking) });
}

/** The templated prompt ids, left-truncated to `maxPromptTokens` (the end, where the model answers, is kept; the reference does the same). */
export function encodeTurnPrompt(tokenizer: Tokenizer, user: string, maxPromptTokens: number, enableThinking: boolean | undefined): TurnPromptIds {
  return encodePrefixedTurnPrompt(tokenizer, '', user, maxPromptTokens, enableThinking);
}

/**
 * `prefix` as plain text before the templated prompt, left-truncated together: the
 * SDAR reference's teacher prompt, its skills block in front of the chat template's
 * first marker.
 */
export function encodePrefixedTurnPrompt(tokenizer: Tokenizer, prefix: string, user: string, maxPromptTokens: number, enableThinking: boolean | undefined): TurnPromptIds {
  return encodeChatPrompt(tokenizer, prefix, [{ role: 'user', content: user }], maxPromptTokens, enableThinking);
}

/** A chat of several messages (a conversation's turns so far) templated as a turn's prompt, `prefix` in front as above. */
export function encodeChatPrompt(tokenizer: Tokenizer, prefix: string, messages: readonly ChatMessage[], maxPromptTokens: number, enableThinking: boolean | undefined): TurnPromptIds {
  if (!Number.isInteger(maxPromptTokens) || maxPromptTokens < 1) throw new RangeError(`encodeTurnPrompt: maxPromptTokens must be a positive integer, got ${maxPromptTokens}`);
  const templated = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, tokenize: true, ...thinkingOption(enableThinking) });
  const ids = prefix === '' ? templated : [...tokenizer.encode(prefix, { addSpecialTokens: false }), ...templated];
  const truncated = ids.length > maxPromptTokens;
  return { ids: truncated ? ids.slice(ids.length - maxPromptTokens) : ids, fullLength: ids.length, truncated };
}

/**
 * The ids of `response` as the chat template renders it as the assistant's answer to
 * `user`: the rendered exchange after the turn's prompt, up to and including the last
 * end-of-sequence token the template closes the turn with (the newline after it
 * belongs to the next turn, and a model never samples it). What the template adds or
 * rewrites (Qwen3's think block around the reasoning, the end token) is in; an end
 * token the response text already carried is not doubled, since the template's text
 * is encoded once. Throws TemplateTurnError when the rendering does not continue the
 * prompt (a response whose think block the template moves while thinking is off).
 */
export function renderedResponseIds(tokenizer: Tokenizer, user: string, response: string, enableThinking: boolean | undefined): number[] {
  const opts = thinkingOption(enableThinking);
  const prompt = tokenizer.applyChatTemplate([{ role: 'user', content: user }], { addGenerationPrompt: true, ...opts });
  const exchange = tokenizer.applyChatTemplate([{ role: 'user', content: user }, { role: 'assistant', content: response }], { addGenerationPrompt: false, ...opts });
  if (!exchange.startsWith(prompt)) {
    throw new TemplateTurnError(
      `the chat template renders the answer ${JSON.stringify(response.length > 60 ? `${response.slice(0, 57)}...` : response)} so that it does not continue the turn's prompt ` +
        `(enable_thinking ${enableThinking ?? 'unset'}: a think block in an answer while thinking is off is moved by the template; set model.thinking to match the data)`,
    );
  }
  const ids = tokenizer.encode(exchange.slice(prompt.length), { addSpecialTokens: false });
  const eos = new Set(tokenizer.eosTokenIds);
  let end = ids.length - 1;
  while (end >= 0 && !eos.has(ids[end])) end--;
  return end < 0 ? ids : ids.slice(0, end + 1);
}

export interface CutTokens {
  /** Number of generated tokens kept. */
  keep: number;
  /** Their text. */
  text: string;
}

/**
 * The shortest prefix of `ids` whose text covers `cut` (a prefix of their decoded text),
 * so the kept ids are exactly what the engine sampled: the text is never re-tokenised.
 * The last kept token may run a few characters past `cut` when one token spans the end.
 */
export function cutTokens(tokenizer: Tokenizer, ids: readonly number[], cut: string): CutTokens {
  const text = (k: number) => tokenizer.decode(ids.slice(0, k), { skipSpecialTokens: true });
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (text(mid).startsWith(cut)) hi = mid;
    else lo = mid + 1;
  }
  return { keep: lo, text: text(lo) };
}
