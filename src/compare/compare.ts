// `compare`: several methods over several seeds on one configuration
// (docs/ALGORITHMS.md section 4). Each run is a `train` child process (so runs can share a
// GPU in parallel and one crash does not take the others down); the table is read
// back from the run directories: final and peak validation success mean ± std over
// seeds, pass@k per validation task over the seeds (unbiased estimator), tokens,
// wall time per phase and the teacher's share of step time.

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readTrajectoryLog } from '../rollout/trajectory_log.ts';
import { formatMeanStd, meanStd, passAtK, type MeanStd } from '../report/eval_stats.ts';
import { metricTotal, readRun, summarizeRun, writeComparisonReport, type RunData } from '../report/report.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import { serverUrls } from '../trainer/servers.ts';
import { intervalTicker } from '../report/progress.ts';
import { CompareProgress } from './compare_progress.ts';
import { failureReason, InvocationLog, parseIterationLine, TRAIN_LOG } from './train_log.ts';
import { overrideWithoutSecrets, type TrainConfig } from '../config/config.ts';
import { readScaleRecord, type ScaleRecord } from '../config/default_run.ts';

export const COMPARE_FILE = 'compare.json';
export const COMPARE_TABLE = 'compare.md';
export const COMPARE_REPORT = 'report.html';

export interface CompareRun {
  method: string;
  seed: number;
  /** Run name inside the comparison directory. */
  name: string;
}

export function comparePlan(methods: readonly string[], seeds: readonly number[]): CompareRun[] {
  return methods.flatMap((method) => seeds.map((seed) => ({ method, seed, name: `${method}-s${seed}` })));
}

export interface RunProgress {
  done: number;
  planned: number;
}

export interface ChildCommand {
  /** The executable and the arguments before `train` (this CLI as it was started). */
  argv: readonly string[];
  /** Arguments after `train`'s own: config file, overrides, flags. */
  trainArgs: readonly string[];
  /** Flags for one run (`--resume`, `--overwrite`), or null to leave the run out. */
  runFlags?: (run: CompareRun) => readonly string[] | null;
  /** Called as a run is about to start: the flags it gets then (a time limit of what is left), or null to leave it for a later invocation. */
  atLaunch?: (run: CompareRun) => readonly string[] | null;
  /** Iterations a run has completed of those it plans, read once as it exits: the log says whether it finished or stopped early (a time limit) to be continued, and onExit gets it. */
  progress?: (run: CompareRun) => RunProgress;
  /** Called as each run ends, before the next starts in its slot, with its progress when `progress` is given. */
  onExit?: (run: CompareRun, code: number, progress: RunProgress | undefined) => void;
  /** Overrides for the runs of one parallel slot (0-based): its own servers. */
  slotOverrides?: (slot: number) => readonly string[];
}

/**
 * The inference servers of each parallel slot. Runs sharing a server would push their
 * weights into it in turn and each roll out on the other's, so each slot gets its own
 * share of rollout.url (and of teacher.url, when the teacher is the policy on the same
 * servers). Null when the runs use no server or run one at a time; an error saying
 * what to give when there are fewer servers than slots.
 */
export function serverSlots(cfg: TrainConfig, parallel: number): string[][] | null {
  const rollout = cfg.rollout.engine === 'http' ? serverUrls(cfg.rollout.url) : [];
  const teacherSynced = cfg.teacher.engine === 'http' && cfg.teacher.model === undefined;
  const teacher = teacherSynced ? serverUrls(cfg.teacher.url) : [];
  if (parallel < 2 || (!rollout.length && !teacher.length)) return null;
  if (teacher.length && teacher.join() !== rollout.join()) {
    throw new Error('compare --parallel: the teacher is the policy (teacher.model unset) on servers of its own, which parallel runs would share; put it on the rollout servers (teacher.url = rollout.url), name a fixed teacher.model, or use --parallel 1');
  }
  if (rollout.length < parallel) {
    throw new Error(
      `compare --parallel ${parallel} with rollout.engine http: parallel runs would push their weights into the same server${rollout.length > 1 ? 's' : ''} (${rollout.join(', ')}). ` +
      `Give rollout.url a list of at least ${parallel} servers (each parallel run gets its own), or use --parallel ${rollout.length}`,
    );
  }
  return Array.from({ length: parallel }, (_, slot) => rollout.filter((_, i) => i % parallel === slot));
}

/** Overrides that point one slot's runs at its servers. */
export function slotServerOverrides(cfg: TrainConfig, urls: readonly string[]): string[] {
  const list = JSON.stringify(urls);
  return [`rollout.url=${list}`, ...(cfg.teacher.engine === 'http' && cfg.teacher.model === undefined ? [`teacher.url=${list}`] : [])];
}

/** How often a running run's log is read for the iterations it reports. */
const LOG_POLL_MS = 1000;

/**
 * Runs every plan entry as `train` in a child process, `parallel` at a time. Each run's
 * output is appended to <dir>/<name>/train.log, and its iterations are reported here
 * with the time left, its own and the comparison's; a run that fails is reported with
 * the reason it gave.
 */
export async function runComparison(
  dir: string, plan: readonly CompareRun[], cmd: ChildCommand, parallel: number, log: (line: string) => void,
): Promise<{ run: CompareRun; code: number; reason: string | null }[]> {
  const flags = new Map(plan.map((r) => [r.name, cmd.runFlags ? cmd.runFlags(r) : []]));
  plan = plan.filter((r) => flags.get(r.name) !== null);
  fs.mkdirSync(dir, { recursive: true });
  const results: { run: CompareRun; code: number; reason: string | null }[] = [];
  const overall = new CompareProgress(plan.length);
  let next = 0;
  const worker = async (slot: number) => {
    while (next < plan.length) {
      const run = plan[next++];
      const late = cmd.atLaunch ? cmd.atLaunch(run) : [];
      if (late === null) {
        log(`not started ${run.name}: no time left (continue with --resume)`);
        continue;
      }
      const runDir = path.join(dir, run.name);
      fs.mkdirSync(runDir, { recursive: true });
      const trainArgs = [
        'train', ...cmd.trainArgs, ...(cmd.slotOverrides?.(slot) ?? []), ...flags.get(run.name)!, ...late,
        `method=${run.method}`, `seed=${run.seed}`, `output.dir=${dir}`, `output.runName=${run.name}`, 'output.progress=plain',
      ];
      log(`start ${run.name}`);
      const started = performance.now();
      // The header names the command, a server key given on the command line left out.
      const runLog = new InvocationLog(path.join(runDir, TRAIN_LOG), trainArgs.map(overrideWithoutSecrets).join(' '));
      const report = () => {
        for (const line of runLog.newLines()) {
          const it = parseIterationLine(line);
          if (!it) continue;
          overall.iteration(run.name, it.iteration, it.total);
          log(`${run.name}: iter ${it.iteration}/${it.total}${it.timeLeft ? `, ${it.timeLeft}` : ''} | ${overall.line()}`);
        }
      };
      const stopPolling = intervalTicker(LOG_POLL_MS, report);
      const code = await new Promise<number>((resolve) => {
        const child = spawn(cmd.argv[0], [...cmd.argv.slice(1), ...trainArgs], { stdio: ['ignore', runLog.fd, runLog.fd] });
        child.on('error', (e) => {
          fs.writeSync(runLog.fd, `error: could not start ${cmd.argv[0]}: ${e.message}\n`);
          resolve(127);
        });
        child.on('exit', (c, signal) => resolve(c ?? (signal ? 128 : 1)));
      });
      stopPolling();
      report();
      runLog.close();
      overall.ended(run.name);
      const secs = ((performance.now() - started) / 1000).toFixed(0);
      const progress = cmd.progress?.(run);
      const reason = code === 0 ? null : failureReason(runLog.text());
      log(code === 0
        ? `${exitLine(run, secs, progress)} | ${overall.line()}`
        : `FAILED ${run.name} (exit ${code}, ${secs} s): ${reason ?? 'it printed nothing'} (log: ${runLog.file}) | ${overall.line()}`);
      cmd.onExit?.(run, code, progress);
      results.push({ run, code, reason });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(parallel, plan.length)) }, (_, slot) => worker(slot)));
  return results;
}

function exitLine(run: CompareRun, secs: string, progress: RunProgress | undefined): string {
  if (!progress) return `done ${run.name} (${secs} s)`;
  if (progress.done >= progress.planned) return `done ${run.name} (${secs} s, ${progress.done} of ${progress.planned} iterations)`;
  return `stopped ${run.name} at iteration ${progress.done} of ${progress.planned} (${secs} s; continue with --resume)`;
}

export interface MethodRow {
  method: string;
  seeds: number[];
  /** Iterations each run completed. */
  iterations: MeanStd;
  /** Validation success before the first update (iteration 0). */
  startVal: MeanStd;
  finalVal: MeanStd;
  peakVal: MeanStd;
  /** pass@k over seeds of the final validation's tasks (k up to the number of seeds). */
  passAtK: Record<number, number>;
  tokensGenerated: MeanStd;
  tokensTrained: MeanStd;
  /** Mean seconds per run spent in each phase. */
  phaseSeconds: Record<string, number>;
  teacherShare: MeanStd;
}

const PHASE_KEYS = ['rollout', 'old_logprobs', 'teacher', 'reference', 'update', 'validation'] as const;

const sumOf = (run: RunData, key: string) => metricTotal(run, key) ?? 0;

/** Attempts and wins per validation task (by task seed) in the run's last validation log (validation.runs attempts each). */
export function finalValidationWins(run: RunData): Map<number, { attempts: number; wins: number }> | null {
  const rollouts = path.join(run.dir, 'rollouts');
  if (!fs.existsSync(rollouts)) return null;
  const last = fs.readdirSync(rollouts)
    .map((f) => /^val-(\d+)\.jsonl$/.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .sort((a, b) => Number(b[1]) - Number(a[1]))[0];
  if (!last) return null;
  const tally = new Map<number, { attempts: number; wins: number }>();
  for (const r of readTrajectoryLog(path.join(rollouts, last[0]))) {
    if (r.error) continue;
    const t = tally.get(r.seed) ?? { attempts: 0, wins: 0 };
    t.attempts++;
    if (r.won) t.wins++;
    tally.set(r.seed, t);
  }
  return tally;
}

export function summarizeMethod(method: string, runs: readonly { seed: number; data: RunData }[]): MethodRow {
  const summaries = runs.map((r) => summarizeRun(r.data));
  const values = (f: (i: number) => number | null) => runs.map((_, i) => f(i)).filter((v): v is number => v !== null && Number.isFinite(v));
  const tallies = runs.map((r) => finalValidationWins(r.data)).filter((w): w is Map<number, { attempts: number; wins: number }> => w !== null);
  const pass: Record<number, number> = {};
  // Tasks every seed finished, with their attempts and wins summed over the seeds.
  const tasks = tallies.length ? [...tallies[0].keys()].filter((t) => tallies.every((w) => w.has(t))) : [];
  const totals = tasks.map((t) => tallies.reduce((a, w) => ({ attempts: a.attempts + w.get(t)!.attempts, wins: a.wins + w.get(t)!.wins }), { attempts: 0, wins: 0 }));
  const attempts = Math.min(...totals.map((x) => x.attempts));
  if (tasks.length) {
    for (let k = 1; k <= attempts; k *= 2) {
      pass[k] = totals.reduce((a, x) => a + passAtK(x.attempts, x.wins, k), 0) / tasks.length;
    }
  }
  const phaseSeconds: Record<string, number> = {};
  for (const p of PHASE_KEYS) phaseSeconds[p] = runs.reduce((a, r) => a + sumOf(r.data, `time/${p}`), 0) / Math.max(runs.length, 1);
  return {
    method,
    seeds: runs.map((r) => r.seed),
    iterations: meanStd(summaries.map((x) => x.iterations)),
    startVal: meanStd(runs.map((r) => r.data.rows.find((row) => row.iteration === 0)?.['val/success']).filter((v): v is number => typeof v === 'number')),
    finalVal: meanStd(values((i) => summaries[i].finalValSuccess)),
    peakVal: meanStd(values((i) => summaries[i].peakValSuccess)),
    passAtK: pass,
    tokensGenerated: meanStd(runs.map((r) => sumOf(r.data, 'tokens/generated'))),
    tokensTrained: meanStd(runs.map((r) => sumOf(r.data, 'tokens/trained'))),
    phaseSeconds,
    teacherShare: meanStd(values((i) => summaries[i].teacherShare)),
  };
}

export function renderCompareTable(rows: readonly MethodRow[]): string {
  const ks = [...new Set(rows.flatMap((r) => Object.keys(r.passAtK).map(Number)))].sort((a, b) => a - b);
  const head = ['method', 'seeds', 'iterations', 'start val success', 'final val success', 'peak val success', ...ks.map((k) => `pass@${k}`), 'tokens generated', 'tokens trained',
    ...PHASE_KEYS.map((p) => `${p} s`), 'teacher share'];
  const num = (v: number | undefined, d = 3) => (v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));
  const lines = rows.map((r) => [
    r.method, r.seeds.join(','), r.iterations.std > 0 ? formatMeanStd(r.iterations, 1) : String(r.iterations.mean), Number.isFinite(r.startVal.mean) ? formatMeanStd(r.startVal) : '–', formatMeanStd(r.finalVal), formatMeanStd(r.peakVal), ...ks.map((k) => num(r.passAtK[k])),
    r.tokensGenerated.mean.toFixed(0), r.tokensTrained.mean.toFixed(0), ...PHASE_KEYS.map((p) => num(r.phaseSeconds[p], 1)),
    Number.isFinite(r.teacherShare.mean) ? formatMeanStd(r.teacherShare) : '–',
  ]);
  return [head, head.map(() => '---'), ...lines].map((cells) => `| ${cells.join(' | ')} |`).join('\n') + '\n';
}

/**
 * Under the table, which runs were scaled down for a software GPU and how: their
 * numbers are not the configuration's. Null when every run ran as configured.
 */
function scaledDownNote(scaled: Readonly<Record<string, ScaleRecord>>): string | null {
  const names = Object.keys(scaled);
  if (!names.length) return null;
  const changes = [...new Set(names.flatMap((n) => scaled[n].changes))];
  const adapters = [...new Set(names.map((n) => scaled[n].adapter))];
  return `Scaled down for the software GPU (${adapters.join(', ')}), so not the configured runs: ${names.join(', ')} (${changes.join(', ')}); compare with --full-size runs them as configured.`;
}

/** Reads the finished runs, writes compare.json, compare.md and the overlaid HTML report; returns the table, with a note under it on runs scaled down. */
export function writeComparison(dir: string, plan: readonly CompareRun[]): { rows: MethodRow[]; table: string; missing: string[] } {
  const present = plan.filter((r) => fs.existsSync(path.join(dir, r.name, 'metrics.jsonl')));
  const missing = plan.filter((r) => !present.includes(r)).map((r) => r.name);
  const methods = [...new Set(present.map((r) => r.method))];
  const rows = methods.map((m) => summarizeMethod(m, present.filter((r) => r.method === m).map((r) => ({ seed: r.seed, data: readRun(path.join(dir, r.name)) }))));
  const scaled = Object.fromEntries(present.flatMap((r) => {
    const record = readScaleRecord(path.join(dir, r.name));
    return record ? [[r.name, record]] : [];
  }));
  const note = scaledDownNote(scaled);
  const table = renderCompareTable(rows) + (note ? `\n${note}\n` : '');
  writeFileAtomic(path.join(dir, COMPARE_FILE), JSON.stringify({ runs: plan, missing, scaledDown: scaled, methods: rows }, null, 2) + '\n');
  writeFileAtomic(path.join(dir, COMPARE_TABLE), table);
  if (present.length) writeComparisonReport(present.map((r) => path.join(dir, r.name)), path.join(dir, COMPARE_REPORT), { title: `compare: ${methods.join(', ')}` });
  return { rows, table, missing };
}
