// A compare run's train.log: every invocation of the run appends its output under a
// header of its own, so an earlier invocation's log (a finished run's, a refusal's) is
// never lost. While the run trains, its new lines are read back for the iterations it
// reports; once it fails, for the reason it gave.

import * as fs from 'node:fs';

export const TRAIN_LOG = 'train.log';

/** An iteration as the run's summary line reports it ("iter 3/100 | ... | about 5 min left"). */
export interface LoggedIteration {
  iteration: number;
  total: number;
  /** The run's own estimate of its time left ("about 5 min left"), when it gave one. */
  timeLeft: string | null;
}

const ITERATION_LINE = /^iter (\d+)\/(\d+) \|.*?(about [^|]+ left)?$/;

export function parseIterationLine(line: string): LoggedIteration | null {
  const m = ITERATION_LINE.exec(line);
  return m ? { iteration: Number(m[1]), total: Number(m[2]), timeLeft: m[3] ?? null } : null;
}

/**
 * Why a run failed, from what its invocation wrote: the last line the CLI printed as an
 * error ("error: ..."), else the last line of an uncaught exception ("Error: ..."), else
 * its last line.
 */
export function failureReason(text: string): string | null {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  const error = lines.findLast((l) => l.startsWith('error: ')) ?? lines.findLast((l) => /^\w*Error\b.*: /.test(l));
  return error ?? lines.at(-1) ?? null;
}

/** The log of one invocation: its header appended to the file, then what it writes, read back as it grows. */
export class InvocationLog {
  readonly fd: number;
  private readonly start: number;
  private read: number;
  private pending = '';

  constructor(readonly file: string, header: string) {
    this.fd = fs.openSync(file, 'a');
    fs.writeSync(this.fd, `${fs.fstatSync(this.fd).size > 0 ? '\n' : ''}=== ${new Date().toISOString()} ${header}\n`);
    this.start = fs.fstatSync(this.fd).size;
    this.read = this.start;
  }

  /** The whole lines written since the last call. */
  newLines(): string[] {
    const size = fs.statSync(this.file).size;
    if (size <= this.read) return [];
    const text = this.slice(this.read, size);
    this.read = size;
    const lines = (this.pending + text).split('\n');
    this.pending = lines.pop()!;
    return lines;
  }

  /** Everything this invocation wrote. */
  text(): string {
    return this.slice(this.start, fs.statSync(this.file).size);
  }

  private slice(from: number, to: number): string {
    const bytes = new Uint8Array(to - from);
    const fd = fs.openSync(this.file, 'r');
    try {
      fs.readSync(fd, bytes, 0, bytes.length, from);
    } finally {
      fs.closeSync(fd);
    }
    return new TextDecoder().decode(bytes);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}
