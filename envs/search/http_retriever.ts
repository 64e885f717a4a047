// A client for a Search-R1 compatible retrieval server (envs/retriever_server.ts, or
// Search-R1's own retrieval_server.py): POST {queries, topk, return_scores} to /retrieve.

import type { RetrievalHit, RetrievedDocument, Retriever } from './retriever.ts';

export interface HttpRetrieverOptions {
  timeoutMs?: number;
}

function isDocument(x: unknown): x is RetrievedDocument {
  const d = x as Record<string, unknown> | null;
  return d !== null && typeof d === 'object' && typeof d.contents === 'string';
}

function toHit(item: unknown, url: string): RetrievalHit {
  const scored = item as { document?: unknown; score?: unknown } | null;
  if (scored !== null && typeof scored === 'object' && isDocument(scored.document)) {
    return { document: { id: String(scored.document.id ?? ''), contents: scored.document.contents }, score: Number(scored.score ?? 0) };
  }
  if (isDocument(item)) return { document: { id: String(item.id ?? ''), contents: item.contents }, score: 0 };
  throw new Error(`retriever ${url}: unexpected result item ${JSON.stringify(item)?.slice(0, 200)}`);
}

export class HttpRetriever implements Retriever {
  private readonly timeoutMs: number;

  /** `url` is the full endpoint, e.g. http://127.0.0.1:8000/retrieve. */
  constructor(readonly url: string, opts: HttpRetrieverOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  async retrieve(queries: readonly string[], topk: number): Promise<RetrievalHit[][]> {
    let res: Response;
    try {
      res = await fetch(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ queries, topk, return_scores: true }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code;
      throw new Error(`retriever ${this.url}: unreachable (${cause ?? (e as Error).message}); is the retrieval server running?`);
    }
    const text = await res.text();
    if (!res.ok) throw new Error(`retriever ${this.url}: HTTP ${res.status}: ${text.slice(0, 500)}`);
    const body = JSON.parse(text) as { result?: unknown };
    if (!Array.isArray(body.result) || body.result.length !== queries.length || !body.result.every(Array.isArray)) {
      throw new Error(`retriever ${this.url}: expected {"result": [[...] x ${queries.length}]}, got ${text.slice(0, 200)}`);
    }
    return (body.result as unknown[][]).map((list) => list.map((item) => toHit(item, this.url)));
  }
}
