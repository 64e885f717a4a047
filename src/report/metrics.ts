// Per-iteration metrics: one JSON object per line in <run>/metrics.jsonl (and, when
// asked, TensorBoard scalars in <run>/tb/), under verl-agent style names:
//   rollout/success, rollout/success/<task_type>, rollout/invalid_rate, rollout/episode_len,
//   actor/pg_loss, actor/kl, actor/entropy, actor/grad_norm, actor/clip_frac, actor/lr,
//   val/success, val/success/<task_type>, val/score (shop),
//   time/rollout (time/rollout_generate: its share waiting on the engine), time/teacher,
//   time/reference, time/update, time/iteration,
//   tokens/generated, tokens/trained, throughput/tokens_per_s
// Values that are not finite (a NaN loss, an infinite gradient norm) are written as
// null, since JSON has no NaN; the report treats null as a gap.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import type { RolloutStats } from '../rollout/agent_loop.ts';
import { TensorBoardWriter } from './tensorboard.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import { METRICS_FILE } from './run_files.ts';

export type Metrics = Record<string, number>;

/** A row read back from metrics.jsonl: null where the value was not finite. */
export type MetricsRow = Record<string, number | null>;


/** Rollout statistics under `prefix` ('rollout' for training rollouts, 'val' for validation, 'val_noskills' for a skills method's validation without them). */
export function rolloutMetrics(stats: RolloutStats, prefix: 'rollout' | 'val' | 'val_noskills'): Metrics {
  const m: Metrics = {
    [`${prefix}/success`]: stats.successRate,
    [`${prefix}/return`]: stats.meanReturn,
    [`${prefix}/episode_len`]: stats.meanEpisodeLength,
    [`${prefix}/invalid_rate`]: stats.invalidActionRate,
    [`${prefix}/truncated`]: stats.truncatedEpisodes,
    [`${prefix}/failed`]: stats.failed,
    [`${prefix}/trajectories`]: stats.trajectories,
  };
  for (const [type, s] of Object.entries(stats.successByType)) m[`${prefix}/success/${type}`] = s.successRate;
  if (stats.envScoreMean !== null) m[`${prefix}/score`] = stats.envScoreMean;
  if (prefix === 'rollout') {
    m['rollout/samples'] = stats.samples;
    m['rollout/truncated_prompts'] = stats.truncatedPrompts;
    m['tokens/generated'] = stats.tokensGenerated;
    m['tokens/prompt'] = stats.promptTokens;
    m['time/rollout'] = stats.wallSeconds;
    // The rest of the rollout is the host's: environments, prompts, tokenization.
    m['time/rollout_generate'] = stats.generateSeconds;
    m['rollout/engine_calls'] = stats.engineCalls;
  } else {
    m[`time/${prefix === 'val' ? 'validation' : 'validation_noskills'}`] = stats.wallSeconds;
  }
  return m;
}

export interface MetricsLoggerOptions {
  /** Also write TensorBoard event files under <run>/tb. */
  tensorboard?: boolean;
  /**
   * Resuming after `resumeFrom` completed iterations: rows of later iterations (logged
   * by the interrupted run after its last checkpoint) are dropped, since the resumed
   * run will log those iterations again.
   */
  resumeFrom?: number;
  /** A new run whose directory already has metrics replaces them (otherwise that is an error). */
  overwrite?: boolean;
}

/** Refuses to start a new run in a directory that holds one, unless it is to be replaced. */
export function assertNewRun(runDir: string, opts: { overwrite?: boolean } = {}): void {
  const file = path.join(runDir, METRICS_FILE);
  if (!opts.overwrite && storage().exists(file)) {
    throw new Error(`${runDir} already holds a run (${METRICS_FILE}): pass --resume to continue it, --overwrite to replace it, or set output.runName to another name`);
  }
}

export class MetricsLogger {
  readonly file: string;
  private tb: TensorBoardWriter | null;

  constructor(readonly runDir: string, opts: MetricsLoggerOptions = {}) {
    storage().makeDir(runDir);
    this.file = path.join(runDir, METRICS_FILE);
    if (opts.resumeFrom !== undefined) truncateMetrics(this.file, opts.resumeFrom);
    else {
      assertNewRun(runDir, opts);
      storage().remove(this.file);
    }
    this.tb = opts.tensorboard ? TensorBoardWriter.open(path.join(runDir, 'tb')) : null;
  }

  /** Appends one iteration's row; `iteration` goes first. */
  log(iteration: number, metrics: Readonly<Metrics>): void {
    if (!(Number.isInteger(iteration) && iteration >= 0)) throw new RangeError(`MetricsLogger.log: iteration must be an integer >= 0, got ${iteration}`);
    const row: Record<string, number | null> = { iteration };
    for (const [k, v] of Object.entries(metrics)) if (k !== 'iteration') row[k] = Number.isFinite(v) ? v : null;
    storage().appendLines(this.file, [JSON.stringify(row)]);
    this.tb?.scalars(iteration, metrics);
  }

  close(): void {
    this.tb?.close();
    this.tb = null;
  }
}

/** Rows of a metrics.jsonl file; a torn last line (a crash mid-write) is skipped, any other bad line is an error. */
export function readMetrics(file: string): MetricsRow[] {
  if (!storage().exists(file)) return [];
  const lines = storage().readText(file).split('\n');
  const rows: MetricsRow[] = [];
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (e) {
      if (i === lines.length - 1) return;
      throw new Error(`${file}:${i + 1}: not a JSON object (${(e as Error).message})`);
    }
    if (typeof row !== 'object' || row === null || Array.isArray(row) || typeof (row as MetricsRow).iteration !== 'number') {
      throw new Error(`${file}:${i + 1}: expected an object with a numeric "iteration"`);
    }
    rows.push(row as MetricsRow);
  });
  return rows;
}

/** Keeps the rows of iterations <= `iteration`. */
export function truncateMetrics(file: string, iteration: number): void {
  if (!storage().exists(file)) return;
  const kept = readMetrics(file).filter((r) => (r.iteration as number) <= iteration);
  writeFileAtomic(file, kept.map((r) => JSON.stringify(r) + '\n').join(''));
}

function short(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  if (a >= 100) return v.toFixed(0);
  if (a >= 1 || a === 0) return v.toFixed(2);
  if (a >= 1e-3) return v.toFixed(4);
  return v.toExponential(1);
}

const SUMMARY: [key: string, label: string][] = [
  ['rollout/success', 'success'],
  ['val/success', 'val'],
  ['val/score', 'val_score'],
  ['actor/pg_loss', 'pg'],
  ['actor/kl', 'kl'],
  ['actor/entropy', 'ent'],
  ['actor/grad_norm', 'gnorm'],
  ['throughput/tokens_per_s', 'tok/s'],
];

const TIMES: [key: string, label: string][] = [
  ['time/rollout', 'rollout'],
  ['time/teacher', 'teacher'],
  ['time/reference', 'ref'],
  ['time/update', 'update'],
  ['time/validation', 'val'],
];

/** "iter 12/150 | success 0.31 | val 0.40 | pg -0.0123 | ... | env failed 2/16 | 57.1s (rollout 45.1s, update 12.0s) | about 2 h 10 min left". */
export function summaryLine(iteration: number, total: number, m: Readonly<Metrics>, timeLeft: string | null = null): string {
  const parts = [`iter ${iteration}/${total}`];
  for (const [key, label] of SUMMARY) if (key in m) parts.push(`${label} ${Number.isFinite(m[key]) ? short(m[key]) : String(m[key])}`);
  // Episodes that failed in the environment (below the share that stops the run).
  for (const [prefix, label] of [['rollout', 'env failed'], ['val', 'val env failed']]) {
    if (m[`${prefix}/failed`] > 0) parts.push(`${label} ${m[`${prefix}/failed`]}/${m[`${prefix}/trajectories`]}`);
  }
  const times = TIMES.filter(([k]) => Number.isFinite(m[k])).map(([k, label]) => `${label} ${m[k].toFixed(1)}s`);
  const total_ = m['time/iteration'];
  if (Number.isFinite(total_) || times.length) parts.push(`${Number.isFinite(total_) ? `${total_.toFixed(1)}s` : ''}${times.length ? ` (${times.join(', ')})` : ''}`.trim());
  if (timeLeft) parts.push(timeLeft);
  return parts.join(' | ');
}
