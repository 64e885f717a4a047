// The search agent's turn as the two reference code bases read it. Both act on the
// first complete <search>…</search>, else <answer>…</answer>, after cutting the
// response just after its first `</search>` (else its first `</answer>`), and neither
// has a language rule: an empty query is sent as it is, a gold answer in any script
// can match.
//
// - search-r1 (Search-R1's generation.py): what follows the cut is dropped, from the
//   response and from what is trained; the action is the first block of either kind in
//   what is left (an answer before a later search wins), tags case-sensitive, and a
//   turn is valid when it has one.
// - sdar (SDAR's verl-agent search_projection): the response is kept whole; the first
//   search block of what is left wins over an answer, tags in any case; the turn is
//   acted on all the same but flagged invalid when the whole response opens both kinds
//   of tag, or one kind twice, or holds no block.

import { pyStrip } from './python_text.ts';

export const SEARCH_PARSINGS = ['search-r1', 'sdar'] as const;
export type SearchParsing = (typeof SEARCH_PARSINGS)[number];

export type SearchAction = { kind: 'search'; query: string } | { kind: 'answer'; answer: string };

export interface ParsedSearchTurn {
  /** The response as the turn keeps it: cut after the action (search-r1) or whole (sdar). */
  kept: string;
  parsed: SearchAction | null;
  /** The action as one block, `<search> q </search>` or `<answer> a </answer>`: what the environment receives and later prompts show; '' when there is none. */
  action: string;
  valid: boolean;
}

/** The response up to and including its first `</search>`, else its first `</answer>`, else whole (generation.py's _postprocess_responses). */
export function cutAfterAction(response: string): string {
  for (const tag of ['</search>', '</answer>']) {
    const at = response.indexOf(tag);
    if (at >= 0) return response.slice(0, at + tag.length);
  }
  return response;
}

function block(kind: SearchAction['kind'], content: string): string {
  return content === '' ? `<${kind}> </${kind}>` : `<${kind}> ${content} </${kind}>`;
}

function turn(kept: string, kind: SearchAction['kind'] | null, raw: string, valid: boolean): ParsedSearchTurn {
  if (kind === null) return { kept, parsed: null, action: '', valid: false };
  const content = pyStrip(raw);
  const parsed: SearchAction = kind === 'search' ? { kind, query: content } : { kind, answer: content };
  return { kept, parsed, action: block(kind, content), valid };
}

/** Search-R1's reading: cut, then the first `<(search|answer)>(.*?)</\1>` of what is left. */
export function parseSearchR1(response: string): ParsedSearchTurn {
  const kept = cutAfterAction(response);
  const m = /<(search|answer)>([\s\S]*?)<\/\1>/.exec(kept);
  return m === null ? turn(kept, null, '', false) : turn(kept, m[1] as SearchAction['kind'], m[2], true);
}

const count = (text: string, tag: RegExp) => text.match(tag)?.length ?? 0;

/** SDAR's reading: the first search block of the cut text, else its first answer block; validity from the tags of the whole response. */
export function parseSdar(response: string): ParsedSearchTurn {
  const cut = cutAfterAction(response);
  const search = /<search>([\s\S]*?)<\/search>/i.exec(cut);
  const answer = search === null ? /<answer>([\s\S]*?)<\/answer>/i.exec(cut) : null;
  const searches = count(response, /<search>/gi);
  const answers = count(response, /<answer>/gi);
  const valid = !(searches > 0 && answers > 0) && searches <= 1 && answers <= 1;
  if (search !== null) return turn(response, 'search', search[1], valid);
  if (answer !== null) return turn(response, 'answer', answer[1], valid);
  return turn(response, null, '', false);
}

export function parseSearchTurn(response: string, parsing: SearchParsing): ParsedSearchTurn {
  return parsing === 'sdar' ? parseSdar(response) : parseSearchR1(response);
}
