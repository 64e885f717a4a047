// A turn's prompt as the model sees it, and responses cut at a token boundary. The
// prompt is one user message in the tokenizer's own chat template with the generation
// prompt on and Qwen3's thinking off (its template pre-fills an empty think block;
// templates without the switch ignore it). Ids come from the real tokenizer: a
// byte-level stand-in would train a model on ids it never reads.

import type { ChatMessage, Tokenizer } from '../models/tokenizer.ts';

export interface TurnPromptIds {
  ids: number[];
  /** Length of the templated prompt before truncation. */
  fullLength: number;
  /** The prompt was longer than the budget and lost its start. */
  truncated: boolean;
}

/** The templated prompt text for one user message. */
export function turnPromptText(tokenizer: Tokenizer, user: string): string {
  return tokenizer.applyChatTemplate([{ role: 'user', content: user }], { addGenerationPrompt: true, enableThinking: false });
}

/** The templated prompt ids, left-truncated to `maxPromptTokens` (the end, where the model answers, is kept; the reference does the same). */
export function encodeTurnPrompt(tokenizer: Tokenizer, user: string, maxPromptTokens: number): TurnPromptIds {
  return encodePrefixedTurnPrompt(tokenizer, '', user, maxPromptTokens);
}

/**
 * `prefix` as plain text before the templated prompt, left-truncated together: the
 * SDAR reference's teacher prompt, its skills block in front of the chat template's
 * first marker.
 */
export function encodePrefixedTurnPrompt(tokenizer: Tokenizer, prefix: string, user: string, maxPromptTokens: number): TurnPromptIds {
  return encodeChatPrompt(tokenizer, prefix, [{ role: 'user', content: user }], maxPromptTokens);
}

/** A chat of several messages (a conversation's turns so far) templated as a turn's prompt, `prefix` in front as above. */
export function encodeChatPrompt(tokenizer: Tokenizer, prefix: string, messages: readonly ChatMessage[], maxPromptTokens: number): TurnPromptIds {
  if (!Number.isInteger(maxPromptTokens) || maxPromptTokens < 1) throw new RangeError(`encodeTurnPrompt: maxPromptTokens must be a positive integer, got ${maxPromptTokens}`);
  const templated = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: false, tokenize: true });
  const ids = prefix === '' ? templated : [...tokenizer.encode(prefix, { addSpecialTokens: false }), ...templated];
  const truncated = ids.length > maxPromptTokens;
  return { ids: truncated ? ids.slice(ids.length - maxPromptTokens) : ids, fullLength: ids.length, truncated };
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
