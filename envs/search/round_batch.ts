// One retrieval call per rollout round, as Search-R1's generation loop makes it: the
// agent loop steps every live episode of a round together, so the searches that arrive
// before the event loop turns are sent as one request (one list of queries) and each
// episode gets its own list of hits back. A failed call fails every episode that
// waited on it, with the same error.

import type { RetrievalHit, Retriever } from './retriever.ts';

interface Waiting {
  queries: readonly string[];
  resolve: (hits: RetrievalHit[][]) => void;
  reject: (e: unknown) => void;
}

export class RoundBatcher implements Retriever {
  private readonly waiting = new Map<number, Waiting[]>();

  constructor(readonly inner: Retriever) {}

  retrieve(queries: readonly string[], topk: number): Promise<RetrievalHit[][]> {
    return new Promise((resolve, reject) => {
      let batch = this.waiting.get(topk);
      if (batch === undefined) {
        batch = [];
        this.waiting.set(topk, batch);
        setTimeout(() => void this.flush(topk), 0);
      }
      batch.push({ queries, resolve, reject });
    });
  }

  private async flush(topk: number): Promise<void> {
    const batch = this.waiting.get(topk)!;
    this.waiting.delete(topk);
    try {
      const lists = await this.inner.retrieve(batch.flatMap((w) => w.queries), topk);
      let at = 0;
      for (const w of batch) {
        w.resolve(lists.slice(at, at + w.queries.length));
        at += w.queries.length;
      }
    } catch (e) {
      for (const w of batch) w.reject(e);
    }
  }

  check(topk: number): Promise<void> {
    return this.inner.check?.(topk) ?? Promise.resolve();
  }
}
