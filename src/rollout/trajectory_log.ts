// Rollout recording (docs/ALGORITHMS.md section 4): every trajectory as one
// JSON line, appended as soon as it ends, so a crashed run keeps what it finished and
// several rollouts (iterations, validation passes) can share one file.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TrajectoryRecord } from './sample.ts';

export class TrajectoryLog {
  private fd: number | null;

  /** Opens `file` for appending, creating it and its folder when missing. */
  constructor(readonly file: string) {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    this.fd = fs.openSync(file, 'a');
  }

  /** Writes one record as one line; `extra` fields (iteration, phase, teacher gap) go next to the record's own. */
  append(record: TrajectoryRecord, extra: Record<string, unknown> = {}): void {
    if (this.fd === null) throw new Error(`trajectory log ${this.file}: append after close`);
    fs.writeSync(this.fd, `${JSON.stringify({ ...extra, ...record })}\n`);
  }

  close(): void {
    if (this.fd === null) return;
    fs.fsyncSync(this.fd);
    fs.closeSync(this.fd);
    this.fd = null;
  }
}

/** Reads a trajectory log back; a malformed line throws naming the file and line. */
export function readTrajectoryLog(file: string): (TrajectoryRecord & Record<string, unknown>)[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const out: (TrajectoryRecord & Record<string, unknown>)[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      throw new Error(`${file}:${i + 1}: not JSON (${(e as Error).message})`);
    }
    const r = value as Partial<TrajectoryRecord> | null;
    if (r === null || typeof r !== 'object' || typeof r.trajectoryId !== 'string' || typeof r.groupId !== 'string' || !Array.isArray(r.turns)) {
      throw new Error(`${file}:${i + 1}: not a trajectory record (needs trajectoryId, groupId, turns)`);
    }
    out.push(value as TrajectoryRecord & Record<string, unknown>);
  });
  return out;
}
