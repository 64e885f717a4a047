// Clients of the two retrieval servers the references run (docs/PROTOCOLS.md section 3),
// both POST /retrieve with return_scores on:
// - search-r1 (Search-R1's retrieval_server.py): {"queries": [...], "topk": k}, one
//   request for all the queries it is given, answered {"result": [[hit, ...] per query]};
// - sdar (SDAR's examples/search/retriever/retrieval_server.py): {"query": "...", "topk": k},
//   one request per query (sent together, at most 256 at once, as SDAR's thread pool),
//   answered {"result": [[hit, ...]]}.
// A hit is {"document": {"id", "contents"}, "score"} or a bare document. Connection
// failures, timeouts and 5xx answers are retried with backoff (src/net/http_call.ts),
// then the call fails; so does a 4xx, an answer that is not JSON or not of that shape.
// Every error names the URL: the agent loop records it as the episode's error.

import { callServer } from '../../src/net/http_call.ts';
import type { RetrievalHit, RetrievedDocument, Retriever } from './retriever.ts';

export const RETRIEVER_PROTOCOLS = ['search-r1', 'sdar'] as const;
export type RetrieverProtocol = (typeof RETRIEVER_PROTOCOLS)[number];

export interface HttpRetrieverOptions {
  protocol?: RetrieverProtocol;
  /** Deadline of each attempt (default 30 s, SDAR's). */
  timeoutMs?: number;
  /** Attempts after the first (default 2). */
  retries?: number;
  /** Wait before the first retry, doubling each time up to 8 times this (default 1 s). */
  backoffMs?: number;
}

export class RetrieverError extends Error {
  override name = 'RetrieverError';
}

const SDAR_CONCURRENCY = 256;
const CHECK_QUERY = 'retriever check';

function isDocument(x: unknown): x is RetrievedDocument {
  const d = x as Record<string, unknown> | null;
  return d !== null && typeof d === 'object' && typeof d.contents === 'string';
}

export class HttpRetriever implements Retriever {
  readonly protocol: RetrieverProtocol;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoffMs: number;

  /** `url` is the full endpoint, e.g. http://127.0.0.1:8000/retrieve. */
  constructor(readonly url: string, opts: HttpRetrieverOptions = {}) {
    this.protocol = opts.protocol ?? 'search-r1';
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.retries = opts.retries ?? 2;
    this.backoffMs = opts.backoffMs ?? 1000;
  }

  /** The longest a retrieve() can take before it fails: every attempt to its deadline, and the waits between them. */
  get longestCallMs(): number {
    let waits = 0;
    for (let r = 0; r < this.retries; r++) waits += Math.min(this.backoffMs * 8, this.backoffMs * 2 ** r);
    return (this.retries + 1) * this.timeoutMs + waits;
  }

  async retrieve(queries: readonly string[], topk: number): Promise<RetrievalHit[][]> {
    if (queries.length === 0) return [];
    if (this.protocol === 'search-r1') return this.call({ queries, topk, return_scores: true }, queries.length);
    const lists: RetrievalHit[][] = new Array(queries.length);
    for (let start = 0; start < queries.length; start += SDAR_CONCURRENCY) {
      const chunk = queries.slice(start, start + SDAR_CONCURRENCY);
      const answers = await Promise.all(chunk.map((query) => this.call({ query, topk, return_scores: true }, 1)));
      answers.forEach(([hits], i) => (lists[start + i] = hits));
    }
    return lists;
  }

  /** One query, as a run's first episode would send it: a server that is down, slow past its deadline, or of the other protocol fails here. */
  async check(topk: number): Promise<void> {
    await this.retrieve([CHECK_QUERY], topk);
  }

  private async call(body: Record<string, unknown>, lists: number): Promise<RetrievalHit[][]> {
    const where = `retriever POST ${this.url}`;
    let answer: unknown;
    try {
      answer = await callServer(
        { url: this.url, method: 'POST', body },
        { timeoutMs: this.timeoutMs, retries: this.retries, backoffMs: this.backoffMs, maxBackoffMs: this.backoffMs * 8, retryTimeouts: true },
      );
    } catch (e) {
      const hint = (e as { status?: number | null }).status === 422 ? ` (does the server take ${this.protocol === 'sdar' ? 'Search-R1\'s {"queries": [...]}? set env.search.retriever.protocol=search-r1' : 'SDAR\'s {"query": "..."}? set env.search.retriever.protocol=sdar'})` : '';
      throw new RetrieverError(`retriever: ${(e as Error).message}${hint}`, { cause: e });
    }
    if (typeof answer === 'string') throw new RetrieverError(`${where}: the answer is not JSON: ${answer.slice(0, 200)}`);
    const result = (answer as { result?: unknown } | null)?.result;
    if (!Array.isArray(result) || result.length !== lists || !result.every(Array.isArray)) {
      const shape = lists === 1 ? '{"result": [[hits of the query]]}' : `{"result": [...] with one list of hits for each of the ${lists} queries}`;
      throw new RetrieverError(`${where}: expected ${shape}, got ${JSON.stringify(answer).slice(0, 200)}`);
    }
    return (result as unknown[][]).map((list) => list.map((item) => this.hit(item, where)));
  }

  private hit(item: unknown, where: string): RetrievalHit {
    const scored = item as { document?: unknown; score?: unknown } | null;
    if (scored !== null && typeof scored === 'object' && isDocument(scored.document)) {
      return { document: { id: String(scored.document.id ?? ''), contents: scored.document.contents }, score: Number(scored.score ?? 0) };
    }
    if (isDocument(item)) return { document: { id: String(item.id ?? ''), contents: item.contents }, score: 0 };
    throw new RetrieverError(`${where}: a hit must be {"document": {"id", "contents"}, "score"} or a document, got ${JSON.stringify(item)?.slice(0, 200)}`);
  }
}
