// The server's single GPU queue. Jobs run one at a time in arrival order; generation
// jobs for the same model waiting next to each other run as one engine batch, so
// concurrent clients (an HTTP engine sends one request per sample) share the decode
// steps instead of queueing behind each other. A job may follow its tokens as the
// batch accepts them (streaming answers).

import type { GenerationRequest, GenerationResult } from '../engines/engine.ts';
import type { LocalEngine, TokenEvent } from '../engines/local_engine.ts';

export type TokenListener = (index: number, token: TokenEvent) => void;

interface GenerateJob {
  kind: 'generate';
  model: string | undefined;
  requests: GenerationRequest[];
  onToken?: TokenListener;
  /** Whether onToken has been called: such a job cannot be run again after a failure. */
  heard: boolean;
  resolve: (r: GenerationResult[]) => void;
  reject: (e: unknown) => void;
}

interface TaskJob {
  kind: 'task';
  run: () => Promise<unknown>;
  resolve: (r: unknown) => void;
  reject: (e: unknown) => void;
}

// Tensor scopes are one stack per process (tensor/scope.ts), so the schedulers of one
// process (two servers started in it, as the tests' vLLM stand-ins are) take turns job
// by job: two jobs' async scopes must never be open at once.
let processTurn: Promise<unknown> = Promise.resolve();

function takeTurn<T>(fn: () => Promise<T>): Promise<T> {
  const run = processTurn.then(fn, fn);
  processTurn = run.catch(() => undefined);
  return run;
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

  /** Generates `requests`; onToken(i, token) hears request i's tokens as they are accepted. */
  generate(model: string | undefined, requests: GenerationRequest[], onToken?: TokenListener): Promise<GenerationResult[]> {
    return new Promise((resolve, reject) => this.push({ kind: 'generate', model, requests, onToken, heard: false, resolve, reject }));
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
          await takeTurn(job.run).then(job.resolve, job.reject);
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
        await takeTurn(() => this.runGroup(group));
      }
    } finally {
      this.running = false;
    }
  }

  private async runGroup(group: GenerateJob[]): Promise<void> {
    this.stats.batches++;
    this.stats.requests += group.length;
    // Request k of the batch is request k - starts[j] of job j.
    const starts: number[] = [];
    let rows = 0;
    for (const j of group) {
      starts.push(rows);
      rows += j.requests.length;
    }
    const jobOf = (k: number) => {
      let j = group.length - 1;
      while (starts[j] > k) j--;
      return j;
    };
    const onToken = group.some((j) => j.onToken)
      ? (k: number, token: TokenEvent) => {
          const j = jobOf(k);
          const job = group[j];
          if (!job.onToken) return;
          job.heard = true;
          job.onToken(k - starts[j], token);
        }
      : undefined;
    try {
      const all = await this.engine.generate(group.flatMap((j) => j.requests), { model: group[0].model, onToken });
      group.forEach((j, i) => j.resolve(all.slice(starts[i], starts[i] + j.requests.length)));
    } catch (e) {
      if (group.length === 1) {
        group[0].reject(e);
        return;
      }
      // One job's fault must not fail the others: run them apart to find it. A job
      // whose tokens were already heard fails with the batch instead of repeating them.
      for (const j of group) {
        if (j.heard) j.reject(e);
        else await this.engine.generate(j.requests, { model: j.model, onToken: j.onToken }).then(j.resolve, j.reject);
      }
    }
  }
}
