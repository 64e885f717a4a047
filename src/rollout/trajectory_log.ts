// Rollout recording (docs/ALGORITHMS.md section 4): every trajectory as one
// JSON line, appended as soon as it ends, so a crashed run keeps what it finished and
// several rollouts (iterations, validation passes) can share one file.

import { storage, type AppendableFile } from '../storage/storage.ts';
import type { TrajectoryRecord } from './sample.ts';

export class TrajectoryLog {
  private out: AppendableFile | null;

  /** Opens `file` for appending, creating it and its folder when missing. */
  constructor(readonly file: string) {
    this.out = storage().openAppend(file);
  }

  /** Writes one record as one line; `extra` fields (iteration, phase, teacher gap) go next to the record's own. */
  append(record: TrajectoryRecord, extra: Record<string, unknown> = {}): void {
    if (this.out === null) throw new Error(`trajectory log ${this.file}: append after close`);
    this.out.append(`${JSON.stringify({ ...extra, ...record })}\n`);
  }

  close(): void {
    this.out?.close();
    this.out = null;
  }
}

/** Reads a trajectory log back; a malformed line throws naming the file and line. */
export function readTrajectoryLog(file: string): (TrajectoryRecord & Record<string, unknown>)[] {
  const lines = storage().readText(file).split('\n');
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
