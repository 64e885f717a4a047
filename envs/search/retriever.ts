// Retrievers: anything that maps queries to ranked documents. BM25 runs in-process over
// a corpus; HttpRetriever (http_retriever.ts) asks a retrieval server; RoundBatcher
// (round_batch.ts) gathers the queries of one rollout round into one call.

import { Bm25Index, type Bm25Options } from '../bm25.ts';
import type { CorpusDocument } from './jsonl.ts';

export type RetrievedDocument = CorpusDocument;

export interface RetrievalHit {
  document: RetrievedDocument;
  score: number;
}

export interface Retriever {
  /** One ranked list of at most `topk` hits per query, best first. */
  retrieve(queries: readonly string[], topk: number): Promise<RetrievalHit[][]> | RetrievalHit[][];
  /** Confirms, before the first episode, that the retriever answers; throws naming it and what it answered. */
  check?(topk: number): Promise<void>;
}

export class Bm25Retriever implements Retriever {
  private readonly index: Bm25Index;

  constructor(private readonly corpus: readonly CorpusDocument[], opts: Bm25Options = {}) {
    this.index = new Bm25Index(corpus.map((d) => d.contents), opts);
  }

  retrieve(queries: readonly string[], topk: number): RetrievalHit[][] {
    return queries.map((q) => this.index.search(q, topk).map((h) => ({ document: this.corpus[h.index], score: h.score })));
  }
}
