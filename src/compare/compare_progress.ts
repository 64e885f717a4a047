// How far a comparison has got and how long the rest will take. Each run counts as one
// unit of work, a running run as the share of its iterations done (from the iteration
// lines it logs, which know what it plans, scaled down or not), and the pace is what
// this command has done so far: a resumed run's earlier iterations count as done but
// not as pace.

import { timeLeftText } from '../report/time_left.ts';

interface RunShare {
  /** The share done when this command first heard of the run. */
  base: number;
  now: number;
  closed: boolean;
}

export class CompareProgress {
  private readonly runs = new Map<string, RunShare>();
  private readonly started: number;
  private finished = 0;

  constructor(private readonly total: number, private readonly now: () => number = () => performance.now()) {
    this.started = now();
  }

  /** Run `name` logged iteration `iteration` of `total`. */
  iteration(name: string, iteration: number, total: number): void {
    const share = Math.min(1, iteration / Math.max(total, 1));
    const run = this.runs.get(name);
    if (run) run.now = share;
    else this.runs.set(name, { base: Math.min(1, (iteration - 1) / Math.max(total, 1)), now: share, closed: false });
  }

  /** Run `name` exited: nothing of it is left to do, whether it completed, stopped or failed. */
  ended(name: string): void {
    const run = this.runs.get(name);
    if (run) run.closed = true;
    else this.runs.set(name, { base: 0, now: 0, closed: true });
    this.finished++;
  }

  /** "compare: 1 of 4 runs done, about 12 min left". */
  line(): string {
    let made = 0;
    let left = this.total - this.runs.size;
    for (const r of this.runs.values()) {
      made += r.now - r.base;
      if (!r.closed) left += 1 - r.now;
    }
    const estimate = timeLeftText((this.now() - this.started) / 1000, made, made + left);
    return `compare: ${this.finished} of ${this.total} runs done${estimate ? `, ${estimate}` : ''}`;
  }
}
