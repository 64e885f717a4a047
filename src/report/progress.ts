// Progress of the phases of an iteration (rollout n/m, reference, update n/m, SFT
// steps, eval's episodes), with how long each has left: a bar redrawn in place on a
// terminal, plain lines when the output is a file or a pipe, where carriage returns
// would pile up as garbage. A phase may go a long time between updates (one readback
// of all reference log-probs, one update step on a software GPU), so a timer keeps the
// bar's clock moving and, in plain mode, prints a line at least every PLAIN_EVERY_MS: a
// log that stops growing means a stuck run.

import { timeLeftText } from './time_left.ts';

export interface ProgressSink {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export type ProgressMode = 'auto' | 'bar' | 'plain' | 'none';

export interface Phase {
  /** `done` of the phase's total are finished; `detail` is shown after the count. */
  update(done: number, detail?: string): void;
  /** Ends the phase (prints its final state). */
  finish(detail?: string): void;
}

/** Calls `fn` every `ms` until the returned function is called, without keeping the process alive. */
export type Ticker = (ms: number, fn: () => void) => () => void;

const REDRAW_MS = 100;
const TICK_MS = 1000;
/** In plain mode, a line at least this often while a phase runs. */
export const PLAIN_EVERY_MS = 5000;
const BAR_WIDTH = 24;

export const intervalTicker: Ticker = (ms, fn) => {
  const timer = setInterval(fn, ms) as unknown;
  if (typeof timer === 'object' && timer !== null && 'unref' in timer) (timer as { unref(): void }).unref();
  else (globalThis as { Deno?: { unrefTimer(id: number): void } }).Deno?.unrefTimer(timer as number);
  return () => clearInterval(timer as Parameters<typeof clearInterval>[0]);
};

export class Progress {
  readonly mode: Exclude<ProgressMode, 'auto'>;
  private live = false;
  /** Stops the running phase's timer; a new phase ends the previous one's (phases run one at a time). */
  private stopTicker: (() => void) | null = null;

  constructor(
    private readonly out: ProgressSink,
    mode: ProgressMode = 'auto',
    private readonly now: () => number = () => performance.now(),
    private readonly ticker: Ticker = intervalTicker,
  ) {
    this.mode = mode === 'auto' ? (out.isTTY ? 'bar' : 'plain') : mode;
  }

  /** A whole line (the per-iteration summary, a warning) that must not be overdrawn by a bar. */
  line(text: string): void {
    this.clear();
    this.out.write(text + '\n');
  }

  /** Erases a bar on the terminal so that other output can start a clean line; the next update redraws it. */
  clear(): void {
    if (this.live) this.out.write('\r\x1b[2K');
    this.live = false;
  }

  phase(label: string, total: number): Phase {
    this.stopTicker?.();
    this.stopTicker = null;
    const start = this.now();
    let lastDraw = -Infinity;
    let lastLine = start;
    let lastQuarter = 0;
    let current = 0;
    let currentDetail: string | undefined;
    let ended = false;
    const seconds = () => ((this.now() - start) / 1000).toFixed(1);
    // The elapsed time, and while the phase runs, how long it has left.
    const clock = (done: number) => {
      const left = timeLeftText((this.now() - start) / 1000, done, total);
      return `${seconds()}s${left ? `, ${left}` : ''}`;
    };
    const text = (done: number, detail?: string) => `${label} ${done}/${total} ${clock(done)}${detail ? `  ${detail}` : ''}`;
    const draw = (done: number, detail?: string) => {
      lastDraw = this.now();
      const filled = total > 0 ? Math.min(BAR_WIDTH, Math.round((done / total) * BAR_WIDTH)) : BAR_WIDTH;
      let s = `${label} [${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${done}/${total} ${clock(done)}${detail ? `  ${detail}` : ''}`;
      if (this.out.columns && s.length >= this.out.columns) s = s.slice(0, this.out.columns - 1);
      this.out.write(`\r\x1b[2K${s}`);
      this.live = true;
    };
    const printLine = (done: number, detail?: string) => {
      lastLine = this.now();
      this.out.write(text(done, detail) + '\n');
    };
    const stop = this.mode === 'none' ? null : this.ticker(TICK_MS, () => {
      if (ended) return;
      if (this.mode === 'bar') draw(current, currentDetail);
      else if (this.now() - lastLine >= PLAIN_EVERY_MS) printLine(current, currentDetail);
    });
    this.stopTicker = stop;
    const end = () => {
      ended = true;
      stop?.();
      if (this.stopTicker === stop) this.stopTicker = null;
    };
    return {
      update: (done, detail) => {
        if (ended) return;
        current = done;
        currentDetail = detail;
        if (this.mode === 'bar') {
          if (this.now() - lastDraw >= REDRAW_MS) draw(done, detail);
        } else if (this.mode === 'plain' && done < total) {
          const quarter = total > 0 ? Math.floor((4 * done) / total) : 0;
          if (quarter > lastQuarter || this.now() - lastLine >= PLAIN_EVERY_MS) {
            lastQuarter = Math.max(lastQuarter, quarter);
            printLine(done, detail);
          }
        }
      },
      finish: (detail) => {
        if (ended) return;
        end();
        if (this.mode === 'bar') {
          draw(Math.max(current, total), detail);
          this.out.write('\n');
          this.live = false;
        } else if (this.mode === 'plain') printLine(Math.max(current, total), detail);
      },
    };
  }
}
