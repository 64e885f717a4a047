// Okapi BM25 over an in-memory inverted index, shared by the shop's product search and
// the search-QA retriever. It stands in for Pyserini/Lucene, which the reference
// environments use: the same defaults (k1 = 0.9, b = 0.4), Lucene's idf
// ln(1 + (N - df + 0.5) / (df + 0.5)), Lucene's English stop words, and a light plural
// stemmer instead of Porter's (enough for "cases" to find "case", and easy to predict).

export interface Bm25Options {
  k1?: number;
  b?: number;
}

export interface Bm25Hit {
  /** Position of the document in the list the index was built from. */
  index: number;
  score: number;
}

const STOP_WORDS = new Set([
  'a', 'an', 'and', 'are', 'as', 'at', 'be', 'but', 'by', 'for', 'if', 'in', 'into', 'is', 'it', 'no', 'not',
  'of', 'on', 'or', 'such', 'that', 'the', 'their', 'then', 'there', 'these', 'they', 'this', 'to', 'was',
  'will', 'with',
]);

/** Harman's S-stemmer: strips plural endings only. */
function stem(word: string): string {
  if (word.length > 4 && word.endsWith('ies') && !word.endsWith('eies') && !word.endsWith('aies')) {
    return word.slice(0, -3) + 'y';
  }
  if (word.length > 3 && word.endsWith('es') && !/(aes|ees|oes)$/.test(word)) return word.slice(0, -1);
  if (word.length > 3 && word.endsWith('s') && !/(us|ss)$/.test(word)) return word.slice(0, -1);
  return word;
}

/** Lower-case, split on anything that is not a letter or digit, drop stop words, stem. */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (raw === '' || STOP_WORDS.has(raw)) continue;
    out.push(stem(raw));
  }
  return out;
}

interface Postings {
  docs: Int32Array;
  tfs: Float32Array;
}

export class Bm25Index {
  readonly size: number;
  private readonly k1: number;
  private readonly b: number;
  private readonly postings = new Map<string, Postings>();
  private readonly lengthNorm: Float64Array;

  constructor(texts: readonly string[], opts: Bm25Options = {}) {
    this.k1 = opts.k1 ?? 0.9;
    this.b = opts.b ?? 0.4;
    this.size = texts.length;
    const docLists = new Map<string, number[]>();
    const tfLists = new Map<string, number[]>();
    const lengths = new Float64Array(texts.length);
    let total = 0;
    for (let d = 0; d < texts.length; d++) {
      const counts = new Map<string, number>();
      const tokens = tokenize(texts[d]);
      for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
      lengths[d] = tokens.length;
      total += tokens.length;
      for (const [t, c] of counts) {
        let docs = docLists.get(t);
        if (docs === undefined) {
          docs = [];
          docLists.set(t, docs);
          tfLists.set(t, []);
        }
        docs.push(d);
        tfLists.get(t)!.push(c);
      }
    }
    for (const [t, docs] of docLists) {
      this.postings.set(t, { docs: Int32Array.from(docs), tfs: Float32Array.from(tfLists.get(t)!) });
    }
    const avg = texts.length > 0 ? total / texts.length || 1 : 1;
    // k1 * (1 - b + b * dl / avgdl), precomputed once per document.
    this.lengthNorm = lengths.map((len) => this.k1 * (1 - this.b + (this.b * len) / avg));
  }

  /** Documents that share a term with the query, best first; ties go to the earlier document. */
  search(query: string, topk: number): Bm25Hit[] {
    if (topk <= 0 || this.size === 0) return [];
    const scores = new Float64Array(this.size);
    const touched: number[] = [];
    for (const term of tokenize(query)) {
      const p = this.postings.get(term);
      if (p === undefined) continue;
      const df = p.docs.length;
      const idf = Math.log(1 + (this.size - df + 0.5) / (df + 0.5));
      for (let i = 0; i < df; i++) {
        const d = p.docs[i];
        if (scores[d] === 0) touched.push(d);
        const tf = p.tfs[i];
        scores[d] += (idf * tf) / (tf + this.lengthNorm[d]);
      }
    }
    touched.sort((x, y) => scores[y] - scores[x] || x - y);
    return touched.slice(0, topk).map((index) => ({ index, score: scores[index] }));
  }
}
