// Answer scoring as Search-R1's qa_em.py does it (after SQuAD): lower-case, drop ASCII
// punctuation (string.punctuation), replace the words a/an/the by a space (\b in
// Python's Unicode regexes: a word character is a letter, a digit or _), then join the
// words Python's str.split() finds with single spaces; a prediction matches when it
// equals any gold answer so normalised.

import { pySplit } from './python_text.ts';

const PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;
const ARTICLES = /(?<![\p{L}\p{N}_])(a|an|the)(?![\p{L}\p{N}_])/gu;

export function normalizeAnswer(s: string): string {
  return pySplit(s.toLowerCase().replace(PUNCTUATION, '').replace(ARTICLES, ' ')).join(' ');
}

export function exactMatch(prediction: string, goldenAnswers: readonly string[]): boolean {
  const p = normalizeAnswer(prediction);
  return goldenAnswers.some((g) => normalizeAnswer(g) === p);
}
