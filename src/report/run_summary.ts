// The lines a training run ends with: how far it got of what it planned, how long that
// took, its final and peak validation, and where its report is. A run that stops early
// says how to carry on; one resumed with nothing left to do says so, with the same
// summary, before anything starts.

import * as path from '../storage/paths.ts';
import { readMetrics } from './metrics.ts';
import { METRICS_FILE } from './run_files.ts';
import { formatDuration } from './time_left.ts';

export interface RunEnd {
  dir: string;
  /** The last iteration (for SFT, optimizer step) the run completed. */
  reached: number;
  /** What it plans in all. */
  total: number;
  /** The units this command ran (first and last) and its wall seconds; null when it ran none. */
  thisCommand: { from: number; to: number; seconds: number } | null;
  /** The report's path, when written. */
  report: string | null;
  /** "iterations" (RL) or "steps" (SFT). */
  unit?: string;
}

/** The validation line: final and peak success with their iterations, from the run's metrics. */
function validationText(rows: readonly Record<string, unknown>[], unit: string): string | null {
  const val = rows.filter((r) => typeof r['val/success'] === 'number').map((r) => ({ at: r.iteration as number, v: r['val/success'] as number }));
  if (!val.length) return null;
  const final = val[val.length - 1];
  const peak = val.reduce((a, b) => (b.v > a.v ? b : a));
  const at = (x: { at: number }) => `${unit.replace(/s$/, '')} ${x.at}`;
  return `success ${final.v.toFixed(3)} at ${at(final)} (final), peak ${peak.v.toFixed(3)} at ${at(peak)}`;
}

export function runSummary(end: RunEnd): string[] {
  const unit = end.unit ?? 'iterations';
  const rows = readMetrics(path.join(end.dir, METRICS_FILE));
  const one = unit.replace(/s$/, '');
  const lines = [
    end.reached < end.total
      ? `${end.dir}: stopped after ${one} ${end.reached} of ${end.total}; continue with the same command and --resume`
      : end.thisCommand === null
        ? `${end.dir}: nothing to do, the run already completed its ${end.total} ${unit}${unit === 'iterations' ? '; to train further, raise iterations (iterations=N) and pass --resume' : ''}`
        : `${end.dir}: finished all ${end.total} ${unit}`,
  ];
  const recorded = rows.filter((r) => typeof r['time/iteration'] === 'number');
  const allSeconds = recorded.reduce((a, r) => a + (r['time/iteration'] as number), 0);
  const times: string[] = [];
  if (end.thisCommand) times.push(`${formatDuration(end.thisCommand.seconds)} for ${unit} ${end.thisCommand.from}-${end.thisCommand.to} in this command`);
  if (recorded.length && (!end.thisCommand || end.thisCommand.from > 1)) times.push(`${formatDuration(allSeconds)} in all (${recorded.length} ${unit} timed)`);
  if (times.length) lines.push(`  time        ${times.join('; ')}`);
  const val = validationText(rows, unit);
  lines.push(`  validation  ${val ?? 'none yet'}`);
  if (end.report) lines.push(`  report      ${end.report}`);
  return lines;
}
