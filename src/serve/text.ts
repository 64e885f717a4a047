// How the server writes generated tokens back: the choice text with stops handled as
// vLLM does, token names, and the log-prob entries of completions and chat answers.

import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { GenerationResult, TopLogprob } from '../engines/engine.ts';

export interface TokenNaming {
  tok: Tokenizer | null;
  /** Name tokens "token_id:<id>" (vLLM's return_tokens_as_token_ids). */
  tokensAsIds: boolean;
}

export function tokenName(id: number, naming: TokenNaming): string {
  return naming.tokensAsIds || !naming.tok ? `token_id:${id}` : naming.tok.decode([id], { skipSpecialTokens: false });
}

/** JSON has no -Infinity; vLLM floors log-probs at -9999. */
export function jsonLogprob(x: number): number {
  return Math.max(x, -9999);
}

/** The choice text vLLM gives: stop strings and stop tokens drop out unless include_stop_str_in_output. */
export function choiceText(r: GenerationResult, includeStop: boolean, skipSpecial: boolean, tok: Tokenizer | null): string {
  if (!tok) return '';
  if (includeStop || r.finishReason !== 'stop') return r.text;
  if (typeof r.stopReason === 'string') return r.text.slice(0, r.text.length - r.stopReason.length);
  return tok.decode(r.tokenIds.slice(0, -1), { skipSpecialTokens: skipSpecial });
}

/** One generated token with what the engine reported for it. */
export interface ScoredToken {
  id: number;
  logprob: number;
  top?: readonly TopLogprob[];
}

/** The tokens of a result as ScoredTokens. */
export function scoredTokens(r: GenerationResult): ScoredToken[] {
  return r.tokenIds.map((id, t) => ({ id, logprob: r.logprobs[t], top: r.topLogprobs?.[t] }));
}

/**
 * Completions' logprobs object for tokens whose text starts at `offset` in the choice
 * text: top_logprobs maps token names to log-probs, the top N plus the sampled token
 * (vLLM's "logprobs + 1"); a null token log-prob (an echoed first prompt token) has no
 * entry.
 */
export function completionLogprobs(tokens: readonly (ScoredToken | { id: number; logprob: null })[], naming: TokenNaming, offset: number) {
  const names = tokens.map((t) => tokenName(t.id, naming));
  const textOffset: number[] = [];
  let at = offset;
  for (const name of names) {
    textOffset.push(at);
    at += name.length;
  }
  return {
    tokens: names,
    token_logprobs: tokens.map((t) => (t.logprob === null ? null : jsonLogprob(t.logprob))),
    top_logprobs: tokens.map((t, i) => {
      if (t.logprob === null) return null;
      const entry: Record<string, number> = {};
      for (const e of ('top' in t && t.top) || []) entry[tokenName(e.id, naming)] = jsonLogprob(e.logprob);
      entry[names[i]] ??= jsonLogprob(t.logprob);
      return entry;
    }),
    text_offset: textOffset,
  };
}

const utf8 = (s: string) => Array.from(Buffer.from(s, 'utf8'));

/** Chat's logprobs.content entries: each token with its top N (OpenAI's top_logprobs). */
export function chatLogprobContent(tokens: readonly ScoredToken[], naming: TokenNaming) {
  return tokens.map((t) => {
    const token = tokenName(t.id, naming);
    return {
      token,
      logprob: jsonLogprob(t.logprob),
      bytes: utf8(token),
      top_logprobs: (t.top ?? []).map((e) => {
        const name = tokenName(e.id, naming);
        return { token: name, logprob: jsonLogprob(e.logprob), bytes: utf8(name) };
      }),
    };
  });
}
