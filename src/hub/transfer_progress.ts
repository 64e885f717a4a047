// Progress of file transfers: on a terminal one line per file redrawn in place (bytes,
// share, speed); in a file or a pipe only a line per file as it completes, since a
// redrawn line would pile up there as thousands.

export interface TransferSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface FileTransfer {
  advance(bytes: number): void;
  done(): void;
}

const REDRAW_MS = 100;

export function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

export class TransferProgress {
  private drawn = false;

  constructor(
    private readonly out: TransferSink,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A line of its own (a resumed or retried transfer), above a redrawn one. */
  line(text: string): void {
    this.clear();
    this.out.write(`${text}\n`);
  }

  private clear(): void {
    if (this.drawn) this.out.write('\r\x1b[2K');
    this.drawn = false;
  }

  /** A transfer of `label`, `total` bytes, `have` of them already on disk. */
  file(label: string, total: number, have = 0): FileTransfer {
    const start = this.now();
    let got = have;
    let lastDraw = -Infinity;
    const rate = () => {
      const s = (this.now() - start) / 1000;
      return s > 0 ? `${formatBytes((got - have) / s)}/s` : '';
    };
    return {
      advance: (bytes) => {
        got += bytes;
        if (!this.out.isTTY || this.now() - lastDraw < REDRAW_MS) return;
        lastDraw = this.now();
        this.drawn = true;
        const share = total > 0 ? Math.floor((got / total) * 100) : 100;
        this.out.write(`\r\x1b[2K  ${label}  ${formatBytes(got)} / ${formatBytes(total)}  ${share}%  ${rate()}`);
      },
      done: () => {
        const seconds = (this.now() - start) / 1000;
        this.line(`  ${label}  ${formatBytes(total)}${got > have ? ` in ${seconds.toFixed(1)} s (${rate()})` : ''}`);
      },
    };
  }
}
