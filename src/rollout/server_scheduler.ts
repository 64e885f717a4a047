// The server's single GPU queue. Jobs run one at a time in arrival order; generation
// jobs for the same model waiting next to each other run as one engine batch, so
// concurrent clients (an HTTP engine sends one request per sample) share the decode
// steps instead of queueing behind each other.

import type { GenerationRequest, GenerationResult } from './engine.ts';
import type { LocalEngine } from './local_engine.ts';

interface GenerateJob {
  kind: 'generate';
  model: string | undefined;
  requests: GenerationRequest[];
  resolve: (r: GenerationResult[]) => void;
  reject: (e: unknown) => void;
}

interface TaskJob {
  kind: 'task';
  run: () => Promise<unknown>;
  resolve: (r: unknown) => void;
  reject: (e: unknown) => void;
}

export class BatchScheduler {
  private jobs: (GenerateJob | TaskJob)[] = [];
  private running = false;
  /** Engine batches run so far and the requests they carried. */
  readonly stats = { batches: 0, requests: 0 };

  constructor(
    private readonly engine: LocalEngine,
    /** Rows one coalesced batch may hold (the engine splits further by its maxBatch). */
    private readonly maxRows: number,
  ) {}

  get pending(): number {
    return this.jobs.length;
  }

  generate(model: string | undefined, requests: GenerationRequest[]): Promise<GenerationResult[]> {
    return new Promise((resolve, reject) => this.push({ kind: 'generate', model, requests, resolve, reject }));
  }

  /** Runs fn alone on the queue (scoring, adapter and weight changes). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return new Promise((resolve, reject) => this.push({ kind: 'task', run: fn, resolve: resolve as (r: unknown) => void, reject }));
  }

  private push(job: GenerateJob | TaskJob): void {
    this.jobs.push(job);
    if (!this.running) void this.drain();
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.jobs.length) {
        const job = this.jobs.shift()!;
        if (job.kind === 'task') {
          await job.run().then(job.resolve, job.reject);
          continue;
        }
        const group = [job];
        let rows = job.requests.length;
        while (this.jobs.length) {
          const next = this.jobs[0];
          if (next.kind !== 'generate' || next.model !== job.model || rows + next.requests.length > this.maxRows) break;
          group.push(this.jobs.shift() as GenerateJob);
          rows += next.requests.length;
        }
        await this.runGroup(group);
      }
    } finally {
      this.running = false;
    }
  }

  private async runGroup(group: GenerateJob[]): Promise<void> {
    this.stats.batches++;
    this.stats.requests += group.length;
    try {
      const all = await this.engine.generate(group.flatMap((j) => j.requests), { model: group[0].model });
      let at = 0;
      for (const j of group) {
        j.resolve(all.slice(at, at + j.requests.length));
        at += j.requests.length;
      }
    } catch (e) {
      if (group.length === 1) {
        group[0].reject(e);
        return;
      }
      // One job's fault must not fail the others: run them apart to find it.
      for (const j of group) await this.engine.generate(j.requests, { model: j.model }).then(j.resolve, j.reject);
    }
  }
}
