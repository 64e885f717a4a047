// Answer scoring as Search-R1 (and SQuAD before it) does it: lower-case, drop ASCII
// punctuation, drop the articles a/an/the, collapse whitespace, then compare for
// equality with any gold answer.

const PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;
const ARTICLES = /(?<![\p{L}\p{N}_])(a|an|the)(?![\p{L}\p{N}_])/gu;

export function normalizeAnswer(s: string): string {
  return s.toLowerCase().replace(PUNCTUATION, '').replace(ARTICLES, ' ').split(/\s+/).filter((w) => w !== '').join(' ');
}

export function exactMatch(prediction: string, goldenAnswers: readonly string[]): boolean {
  const p = normalizeAnswer(prediction);
  return goldenAnswers.some((g) => normalizeAnswer(g) === p);
}
