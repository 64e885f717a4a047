// Progress of the phases of an iteration (rollout n/m, update n/m): a bar redrawn in
// place on a terminal, a few plain lines (each quarter, and the end) when the output is
// a file or a pipe, where carriage returns would pile up as garbage.

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

const REDRAW_MS = 100;
const BAR_WIDTH = 24;

export class Progress {
  readonly mode: Exclude<ProgressMode, 'auto'>;
  private live = false;

  constructor(
    private readonly out: ProgressSink,
    mode: ProgressMode = 'auto',
    private readonly now: () => number = () => performance.now(),
  ) {
    this.mode = mode === 'auto' ? (out.isTTY ? 'bar' : 'plain') : mode;
  }

  /** A whole line (the per-iteration summary, a warning) that must not be overdrawn by a bar. */
  line(text: string): void {
    this.clearBar();
    this.out.write(text + '\n');
  }

  phase(label: string, total: number): Phase {
    const start = this.now();
    let lastDraw = -Infinity;
    let lastQuarter = 0;
    let current = 0;
    let ended = false;
    const seconds = () => ((this.now() - start) / 1000).toFixed(1);
    const text = (done: number, detail?: string) => `${label} ${done}/${total} ${seconds()}s${detail ? `  ${detail}` : ''}`;
    const draw = (done: number, detail?: string) => {
      const filled = total > 0 ? Math.min(BAR_WIDTH, Math.round((done / total) * BAR_WIDTH)) : BAR_WIDTH;
      let s = `${label} [${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${done}/${total} ${seconds()}s${detail ? `  ${detail}` : ''}`;
      if (this.out.columns && s.length >= this.out.columns) s = s.slice(0, this.out.columns - 1);
      this.out.write(`\r\x1b[2K${s}`);
      this.live = true;
    };
    return {
      update: (done, detail) => {
        if (ended) return;
        current = done;
        if (this.mode === 'bar') {
          const t = this.now();
          if (t - lastDraw >= REDRAW_MS) {
            lastDraw = t;
            draw(done, detail);
          }
        } else if (this.mode === 'plain' && total > 0) {
          const quarter = Math.floor((4 * done) / total);
          if (quarter > lastQuarter && done < total) {
            lastQuarter = quarter;
            this.out.write(text(done, detail) + '\n');
          }
        }
      },
      finish: (detail) => {
        if (ended) return;
        ended = true;
        if (this.mode === 'bar') {
          draw(Math.max(current, total), detail);
          this.out.write('\n');
          this.live = false;
        } else if (this.mode === 'plain') this.out.write(text(Math.max(current, total), detail) + '\n');
      },
    };
  }

  private clearBar(): void {
    if (this.live) this.out.write('\r\x1b[2K');
    this.live = false;
  }
}
