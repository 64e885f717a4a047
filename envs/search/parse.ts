// The search agent's turn: reasoning, then exactly one <search> query </search> or
// <answer> text </answer>. Generation is cut after the first closing tag; the turn is
// invalid when it holds neither block, both kinds of tag, one kind twice, an empty
// block, or CJK text (verl-agent's search projection, counting tags in the whole
// response).

/** Han, kana and hangul: a turn that drifts into them is invalid. */
const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]/;

export type SearchAction = { kind: 'search'; query: string } | { kind: 'answer'; answer: string };

export interface ParsedSearchTurn {
  /** The response up to and including the first </search> or </answer>. */
  cut: string;
  /** The action as the history shows it, '' when invalid. */
  action: string;
  parsed: SearchAction | null;
  valid: boolean;
}

/** Where generation stops: just after the first closing tag. */
export function cutResponse(response: string): string {
  const ends = ['</search>', '</answer>']
    .map((tag) => {
      const at = response.indexOf(tag);
      return at < 0 ? -1 : at + tag.length;
    })
    .filter((at) => at >= 0);
  return ends.length > 0 ? response.slice(0, Math.min(...ends)) : response;
}

function count(text: string, tag: string): number {
  return text.split(tag).length - 1;
}

export function parseSearchResponse(response: string): ParsedSearchTurn {
  const cut = cutResponse(response);
  const invalid = { cut, action: '', parsed: null, valid: false };
  const searches = count(response, '<search>');
  const answers = count(response, '<answer>');
  if (searches + answers !== 1 || CJK.test(response)) return invalid;
  const m = /<(search|answer)>([\s\S]*?)<\/\1>/.exec(cut);
  if (m === null) return invalid;
  const content = m[2].trim();
  if (content === '') return invalid;
  return m[1] === 'search'
    ? { cut, action: `<search> ${content} </search>`, parsed: { kind: 'search', query: content }, valid: true }
    : { cut, action: `<answer> ${content} </answer>`, parsed: { kind: 'answer', answer: content }, valid: true };
}
