// Comparison runs kept as data in the repository: each finished run of a comparison
// becomes docs/results/<env>/<method>-s<seed>/ with
//   run.json       what ran: method, seed, iterations, the commit and the command, and
//                  the segments it was made in (a run stopped at --time-limit and
//                  continued by --resume, perhaps from another commit)
//   metrics.jsonl  the keys the tables and the curves need, 4 significant digits
//   val_tasks.json wins and attempts per validation task at the final and the peak
//                  validation (pairing by task and pass@k need them)
// so that the table builds up over several sessions and is rebuilt on any machine
// from these files alone (results.ts). Small on purpose: a few KB to a few tens of KB
// per run.

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readTrajectoryLog } from '../rollout/trajectory_log.ts';
import { readMetrics, type MetricsRow } from '../report/metrics.ts';
import { METRICS_FILE } from '../report/run_files.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import { DYNAMICS_KEYS } from './run_dynamics.ts';

export const ARCHIVE_META = 'run.json';
export const ARCHIVE_METRICS = 'metrics.jsonl';
export const ARCHIVE_VAL_TASKS = 'val_tasks.json';

/**
 * The metrics an archived run keeps (rows keep the ones they have): the table's and the
 * curves', and those the table of the terms' dynamics reads (run_dynamics.ts). Archives
 * written before a key was added lack it, and read as before.
 */
export const ARCHIVE_KEYS: readonly string[] = [
  'iteration', 'rollout/success', 'val/success', 'val_noskills/success',
  'time/rollout', 'time/old_logprobs', 'time/teacher', 'time/reference', 'time/update', 'time/validation',
  ...DYNAMICS_KEYS.map((k) => k.key),
];

export interface ArchiveMeta {
  method: string;
  seed: number;
  /** Iterations the run completed, and those its configuration asked for. */
  iterations: number;
  plannedIterations: number;
  /** The commit the run was made from ("unknown" where no repository was at hand). */
  commit: string;
  /** The command that made the run, as the comparison started it. */
  command: string;
  /** The run's configuration hash (configHash), so runs of one table can be told to share a recipe. */
  configHash: string;
  /** The invocations that made it, in order; absent in archives written before they were kept. */
  segments?: RunSegment[];
}

/** One invocation of the comparison that ran part of a run: from iteration `from` on. */
export interface RunSegment {
  from: number;
  commit: string;
  command: string;
}

/** Wins and attempts per validation task, keyed by the task's seed. */
export type TaskWins = Record<string, [wins: number, attempts: number]>;

export interface ValidationTasks {
  final: { iteration: number; tasks: TaskWins } | null;
  peak: { iteration: number; tasks: TaskWins } | null;
}

export interface ArchivedRun {
  name: string;
  dir: string;
  meta: ArchiveMeta;
  rows: MetricsRow[];
  validation: ValidationTasks;
}

const round = (v: number) => (Number.isInteger(v) ? v : Number(v.toPrecision(4)));

function trimRow(row: MetricsRow): MetricsRow {
  const out: MetricsRow = {};
  for (const k of ARCHIVE_KEYS) {
    const v = row[k];
    if (typeof v === 'number' && Number.isFinite(v)) out[k] = round(v);
  }
  return out;
}

/** Wins and attempts per task of the validation log written at `iteration`; null when the run kept none. */
function validationWins(runDir: string, iteration: number): TaskWins | null {
  const file = path.join(runDir, 'rollouts', `val-${iteration}.jsonl`);
  if (!fs.existsSync(file)) return null;
  const tally: TaskWins = {};
  for (const r of readTrajectoryLog(file)) {
    if (r.error) continue;
    const t = (tally[String(r.seed)] ??= [0, 0]);
    t[1]++;
    if (r.won) t[0]++;
  }
  return tally;
}

/** The final and the peak validation of a run's metrics, with their per-task outcomes. */
function validationTasks(runDir: string, rows: readonly MetricsRow[]): ValidationTasks {
  const vals = rows.filter((r) => typeof r['val/success'] === 'number' && typeof r.iteration === 'number') as (MetricsRow & { iteration: number })[];
  if (!vals.length) return { final: null, peak: null };
  const final = vals[vals.length - 1];
  // The first of equal peaks, as summarizeRun reports it.
  const peak = vals.reduce((best, r) => ((r['val/success'] as number) > (best['val/success'] as number) ? r : best), vals[0]);
  const at = (row: { iteration: number }) => {
    const tasks = validationWins(runDir, row.iteration);
    return tasks ? { iteration: row.iteration, tasks } : null;
  };
  return { final: at(final), peak: at(peak) };
}

/** Writes the archive of one run directory into `dest` (replacing an older archive of it). */
export function archiveRun(runDir: string, dest: string, meta: Omit<ArchiveMeta, 'iterations'>): ArchiveMeta {
  const rows = readMetrics(path.join(runDir, METRICS_FILE));
  const iterations = rows.reduce((m, r) => Math.max(m, typeof r.iteration === 'number' ? r.iteration : 0), 0);
  const full: ArchiveMeta = { ...meta, iterations };
  fs.mkdirSync(dest, { recursive: true });
  writeFileAtomic(path.join(dest, ARCHIVE_METRICS), rows.map((r) => JSON.stringify(trimRow(r))).join('\n') + '\n');
  writeFileAtomic(path.join(dest, ARCHIVE_VAL_TASKS), JSON.stringify(validationTasks(runDir, rows)) + '\n');
  // run.json last: its presence says the archive is whole.
  writeFileAtomic(path.join(dest, ARCHIVE_META), JSON.stringify(full, null, 2) + '\n');
  return full;
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: ${(e as Error).message}`);
  }
}

function checkSegment(v: unknown, where: string): RunSegment {
  const s = v as Record<string, unknown>;
  if (!s || typeof s !== 'object') throw new Error(`${where}: expected an object {from, commit, command}, got ${JSON.stringify(v)}`);
  if (!Number.isInteger(s.from) || (s.from as number) < 1) throw new Error(`${where}: from must be an iteration >= 1, got ${JSON.stringify(s.from)}`);
  for (const f of ['commit', 'command'] as const) if (typeof s[f] !== 'string') throw new Error(`${where}: ${f} must be a string, got ${JSON.stringify(s[f])}`);
  return s as unknown as RunSegment;
}

function checkMeta(v: unknown, file: string): ArchiveMeta {
  const m = v as Record<string, unknown>;
  const bad = (field: string, want: string) => new Error(`${file}: ${field} must be ${want}, got ${JSON.stringify(m?.[field])}`);
  if (!m || typeof m !== 'object') throw new Error(`${file}: expected a JSON object`);
  for (const f of ['method', 'commit', 'command', 'configHash'] as const) if (typeof m[f] !== 'string') throw bad(f, 'a string');
  for (const f of ['seed', 'iterations', 'plannedIterations'] as const) if (!Number.isInteger(m[f]) || (m[f] as number) < 0) throw bad(f, 'a whole number >= 0');
  if (m.segments !== undefined) {
    if (!Array.isArray(m.segments)) throw bad('segments', 'a list');
    m.segments.forEach((s, i) => checkSegment(s, `${file}: segments[${i}]`));
  }
  return m as unknown as ArchiveMeta;
}

/** Where a comparison directory keeps the segments of its run `name` until the run is archived. */
const segmentsFile = (compareDir: string, name: string) => path.join(compareDir, 'segments', `${name}.jsonl`);

/**
 * Notes that an invocation runs `name` from iteration `segment.from` on; a run that
 * starts over (from 1) drops the segments of the run it replaces.
 */
export function recordSegment(compareDir: string, name: string, segment: RunSegment): void {
  const file = segmentsFile(compareDir, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  if (segment.from === 1) fs.rmSync(file, { force: true });
  fs.appendFileSync(file, JSON.stringify(segment) + '\n');
}

/** The segments noted for run `name`, oldest first; a segment whose run was resumed from an earlier point is cut back to it. */
export function readSegments(compareDir: string, name: string): RunSegment[] {
  const file = segmentsFile(compareDir, name);
  if (!fs.existsSync(file)) return [];
  const out: RunSegment[] = [];
  fs.readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new Error(`${file}:${i + 1}: ${(e as Error).message}`);
    }
    const s = checkSegment(v, `${file}:${i + 1}`);
    while (out.length && out[out.length - 1].from >= s.from) out.pop();
    out.push(s);
  });
  return out;
}

/** One archived run; null when `dir` holds no whole archive (no run.json yet). */
export function readArchivedRun(dir: string): ArchivedRun | null {
  const metaFile = path.join(dir, ARCHIVE_META);
  if (!fs.existsSync(metaFile)) return null;
  const meta = checkMeta(readJson(metaFile), metaFile);
  const rows = readMetrics(path.join(dir, ARCHIVE_METRICS));
  const valFile = path.join(dir, ARCHIVE_VAL_TASKS);
  const validation = (fs.existsSync(valFile) ? readJson(valFile) : { final: null, peak: null }) as ValidationTasks;
  return { name: path.basename(dir), dir, meta, rows, validation };
}

/** Every whole archive under `root`, by name. */
export function readArchive(root: string): ArchivedRun[] {
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => readArchivedRun(path.join(root, d.name)))
    .filter((r): r is ArchivedRun => r !== null)
    .sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * The commit of the working tree the runs come from: WGT_COMMIT where set (a copy of
 * the tree sent to a test machine, whose .git, if any, may hold another commit), else
 * `git rev-parse --short HEAD` (with "+changes" when the tree differs from it), else
 * "unknown".
 */
export function sourceCommit(cwd = process.cwd()): string {
  const given = process.env.WGT_COMMIT?.trim();
  if (given) return given;
  const git = (...args: string[]) => spawnSync('git', args, { cwd, encoding: 'utf8' });
  const head = git('rev-parse', '--short', 'HEAD');
  if (head.status === 0 && head.stdout.trim()) {
    const dirty = git('status', '--porcelain', '--untracked-files=no').stdout.trim() !== '';
    return head.stdout.trim() + (dirty ? '+changes' : '');
  }
  return 'unknown';
}

/** Whether `root/name` holds a run that completed its planned iterations. */
export function archivedComplete(root: string, name: string): boolean {
  const run = readArchivedRun(path.join(root, name));
  return run !== null && run.meta.iterations >= run.meta.plannedIterations;
}
