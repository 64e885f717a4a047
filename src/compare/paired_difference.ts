// Two methods' final validation success compared run for run: the same validation
// panel, the same seeds, so the difference is taken per seed and task and its spread
// comes from a two-level bootstrap that resamples seeds and then tasks, carrying both
// the seed-to-seed and the task-to-task variation.

import { Rng } from '../util/random.ts';
import type { ArchivedRun, TaskWins } from './archive.ts';
import { count, points } from './words.ts';

export interface PairedDifference {
  /** Mean over the shared seeds and tasks of (method − baseline) task success. */
  mean: number;
  lo: number;
  hi: number;
  seeds: number;
  tasks: number;
}

/** Per-task success rate of a run's final validation. */
function taskRates(tasks: TaskWins): Map<string, number> {
  return new Map(Object.entries(tasks).filter(([, [, n]]) => n > 0).map(([t, [w, n]]) => [t, w / n]));
}

/**
 * (method − baseline) success paired by seed and task, over the seeds and tasks both
 * have; the interval is the 2.5th and 97.5th percentiles of `draws` bootstrap means,
 * each resampling the seeds and then the tasks (the same tasks for every seed).
 */
export function pairedDifference(method: readonly ArchivedRun[], baseline: readonly ArchivedRun[], draws = 2000, seed = 0): PairedDifference | null {
  const bySeed = (runs: readonly ArchivedRun[]) => new Map(runs.filter((r) => r.validation.final).map((r) => [r.meta.seed, taskRates(r.validation.final!.tasks)]));
  const m = bySeed(method);
  const b = bySeed(baseline);
  const seeds = [...m.keys()].filter((s) => b.has(s)).sort((x, y) => x - y);
  if (!seeds.length) return null;
  const tasks = [...m.get(seeds[0])!.keys()].filter((t) => seeds.every((s) => m.get(s)!.has(t) && b.get(s)!.has(t))).sort();
  if (!tasks.length) return null;
  const d = seeds.map((s) => tasks.map((t) => m.get(s)!.get(t)! - b.get(s)!.get(t)!));
  const meanOver = (si: readonly number[], ti: readonly number[]) => si.reduce((a, i) => a + ti.reduce((c, j) => c + d[i][j], 0) / ti.length, 0) / si.length;
  const all = (n: number) => Array.from({ length: n }, (_, i) => i);
  const rng = Rng.seeded(seed, 'paired-bootstrap');
  const means: number[] = [];
  for (let k = 0; k < draws; k++) {
    const si = seeds.map(() => rng.int(seeds.length));
    const ti = tasks.map(() => rng.int(tasks.length));
    means.push(meanOver(si, ti));
  }
  means.sort((x, y) => x - y);
  const pick = (q: number) => means[Math.min(draws - 1, Math.max(0, Math.round(q * (draws - 1))))];
  return { mean: meanOver(all(seeds.length), all(tasks.length)), lo: pick(0.025), hi: pick(0.975), seeds: seeds.length, tasks: tasks.length };
}

/** `+2.0 (−3.5 to +7.0; 3 seeds × 128 tasks)`, in points. */
export const formatDifference = (d: PairedDifference): string =>
  `${points(d.mean)} (${points(d.lo)} to ${points(d.hi)}; ${count(d.seeds, 'seed')} × ${count(d.tasks, 'task')})`;

/** Whether the 95% interval leaves zero out: a difference the panel tells from none. */
export const separates = (d: PairedDifference): boolean => d.lo > 0 || d.hi < 0;
