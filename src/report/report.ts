// The HTML report of one run or a comparison of several: a summary table (final and
// peak validation success, drop from peak, throughput, time, teacher share of step
// time) and line charts of the metrics over iterations, one curve per run. A single
// self-contained file with inline SVG, so it opens offline and can be mailed around.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { stability } from './eval_stats.ts';
import { readMetrics, type MetricsRow } from './metrics.ts';
import { escapeXml, lineChart, type Series } from './svg_chart.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import { METRICS_FILE, REPORT_FILE, RUN_CONFIG_FILE } from './run_files.ts';


export interface RunData {
  name: string;
  dir: string;
  rows: MetricsRow[];
  /** The run's resolved configuration, when the directory has one. */
  config: Record<string, unknown> | null;
}

export function readRun(runDir: string, name = path.basename(path.resolve(runDir))): RunData {
  const metricsPath = path.join(runDir, METRICS_FILE);
  if (!storage().exists(metricsPath)) throw new Error(`${metricsPath}: not found (is ${runDir} a run directory?)`);
  const configPath = path.join(runDir, RUN_CONFIG_FILE);
  let config: Record<string, unknown> | null = null;
  if (storage().exists(configPath)) {
    try {
      config = JSON.parse(storage().readText(configPath));
    } catch (e) {
      throw new Error(`${configPath}: not valid JSON (${(e as Error).message})`);
    }
  }
  return { name, dir: runDir, rows: readMetrics(metricsPath), config };
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

interface ChartSpec {
  title: string;
  keys: string[];
}

/** The fixed charts; every other metric gets a chart of its own further down. */
const CHARTS: ChartSpec[] = [
  { title: 'Success rate', keys: ['rollout/success', 'val/success'] },
  { title: 'Validation success', keys: ['val/success'] },
  { title: 'Return (reward)', keys: ['rollout/return'] },
  { title: 'Shop score', keys: ['rollout/score', 'val/score'] },
  { title: 'Policy loss', keys: ['actor/pg_loss', 'actor/loss'] },
  { title: 'KL to reference', keys: ['actor/kl'] },
  { title: 'Entropy', keys: ['actor/entropy'] },
  { title: 'Gradient norm', keys: ['actor/grad_norm'] },
  { title: 'Clip fraction', keys: ['actor/clip_frac'] },
  { title: 'Rollout engine against trainer', keys: ['rollout/probs_diff_mean', 'rollout/probs_diff_max', 'rollout/mismatch_kl'] },
  { title: 'Rollout importance ratio', keys: ['rollout/is_ratio_mean', 'rollout/is_ratio_min', 'rollout/is_ratio_max'] },
  { title: 'Rollout correction: share cut', keys: ['rollout/is_truncated_share', 'rollout/is_masked_share'] },
  { title: 'Throughput (tokens/s)', keys: ['throughput/tokens_per_s'] },
  { title: 'Seconds per phase', keys: ['time/rollout', 'time/teacher', 'time/reference', 'time/update', 'time/validation'] },
  {
    title: 'GPU memory per phase (GiB)',
    keys: ['memory/peak_gib', ...['rollout', 'old_logprobs', 'teacher', 'reference', 'update', 'validation'].map((p) => `memory/${p}_peak_gib`)],
  },
  ...(['dispatches', 'submits', 'readbacks'] as const).map((count) => ({
    title: `GPU ${count} per phase`,
    keys: ['rollout', 'old_logprobs', 'teacher', 'reference', 'update'].map((p) => `gpu/${p}_${count}`),
  })),
  { title: 'Invalid-action rate', keys: ['rollout/invalid_rate'] },
  { title: 'Episode length', keys: ['rollout/episode_len'] },
];

const SPARSE = /^val\//;

function seriesFor(run: RunData, key: string): [number, number | null][] {
  return run.rows.filter((r) => key in r).map((r) => [r.iteration as number, r[key]]);
}

function chartFor(runs: readonly RunData[], title: string, keys: readonly string[]): string | null {
  const series: Series[] = [];
  runs.forEach((run, ri) => {
    keys.forEach((key, ki) => {
      const points = seriesFor(run, key);
      if (!points.some(([, y]) => y !== null)) return;
      const several = runs.length > 1;
      series.push({
        name: several ? (keys.length > 1 ? `${run.name}: ${key}` : run.name) : key,
        color: PALETTE[(several ? ri : ki) % PALETTE.length],
        points,
        dashed: several && ki > 0,
        markers: SPARSE.test(key) || points.length <= 2,
      });
    });
  });
  return series.length ? lineChart({ title, series }) : null;
}

function allKeys(runs: readonly RunData[]): string[] {
  const keys = new Set<string>();
  for (const run of runs) for (const row of run.rows) for (const k of Object.keys(row)) if (k !== 'iteration') keys.add(k);
  return [...keys].sort();
}

function lastValue(run: RunData, key: string): number | null {
  for (let i = run.rows.length - 1; i >= 0; i--) {
    const v = run.rows[i][key];
    if (typeof v === 'number') return v;
  }
  return null;
}

/** The sum of a metric over the run's rows; null when no row has it. */
export function metricTotal(run: RunData, key: string): number | null {
  const vs = run.rows.map((r) => r[key]).filter((v): v is number => typeof v === 'number');
  return vs.length ? vs.reduce((a, b) => a + b, 0) : null;
}

function maxValue(run: RunData, key: string): number | null {
  const vs = run.rows.map((r) => r[key]).filter((v): v is number => typeof v === 'number');
  return vs.length ? Math.max(...vs) : null;
}

function mean(run: RunData, key: string): number | null {
  const vs = run.rows.map((r) => r[key]).filter((v): v is number => typeof v === 'number');
  return vs.length ? vs.reduce((a, b) => a + b, 0) / vs.length : null;
}

const PHASES = ['time/rollout', 'time/old_logprobs', 'time/teacher', 'time/reference', 'time/update'];

export interface RunSummary {
  name: string;
  method: string | null;
  env: string | null;
  model: string | null;
  iterations: number;
  finalRolloutSuccess: number | null;
  finalValSuccess: number | null;
  peakValSuccess: number | null;
  peakIteration: number | null;
  dropFromPeak: number | null;
  meanTokensPerSecond: number | null;
  totalSeconds: number | null;
  /** Teacher scoring time over the sum of the step phases. */
  teacherShare: number | null;
  /** The most GPU memory any iteration held (memory/peak_gib), in GiB. */
  peakMemoryGib: number | null;
}

export function summarizeRun(run: RunData): RunSummary {
  const val = stability(run.rows.filter((r) => typeof r['val/success'] === 'number').map((r) => [r.iteration as number, r['val/success'] as number]));
  const phaseTotal = PHASES.map((k) => metricTotal(run, k) ?? 0).reduce((a, b) => a + b, 0);
  const teacher = metricTotal(run, 'time/teacher');
  const pick = (obj: unknown, ...keys: string[]): string | null => {
    let v = obj;
    for (const k of keys) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
    return typeof v === 'string' ? v : null;
  };
  return {
    name: run.name,
    method: pick(run.config, 'method'),
    env: pick(run.config, 'env', 'name'),
    model: pick(run.config, 'model', 'path'),
    iterations: run.rows.length ? Math.max(...run.rows.map((r) => r.iteration as number)) : 0,
    finalRolloutSuccess: lastValue(run, 'rollout/success'),
    finalValSuccess: val?.final ?? null,
    peakValSuccess: val?.peak ?? null,
    peakIteration: val?.peakIteration ?? null,
    dropFromPeak: val?.dropFromPeak ?? null,
    meanTokensPerSecond: mean(run, 'throughput/tokens_per_s'),
    totalSeconds: metricTotal(run, 'time/iteration') ?? (phaseTotal > 0 ? phaseTotal : null),
    teacherShare: teacher !== null && phaseTotal > 0 ? teacher / phaseTotal : null,
    peakMemoryGib: maxValue(run, 'memory/peak_gib'),
  };
}

function cell(v: number | string | null, digits = 3): string {
  if (v === null) return '<td class="na">–</td>';
  if (typeof v === 'string') return `<td>${escapeXml(v)}</td>`;
  return `<td class="num">${Number.isInteger(v) ? v : v.toFixed(digits)}</td>`;
}

function summaryTable(runs: readonly RunData[]): string {
  const head = ['run', 'method', 'env', 'model', 'iterations', 'final success (rollout)', 'final val success', 'peak val success', 'peak at', 'drop from peak', 'tokens/s', 'time (s)', 'teacher share', 'GPU memory (GiB)'];
  const rows = runs.map(summarizeRun).map((s) => `<tr>${[
    cell(s.name), cell(s.method), cell(s.env), cell(s.model), cell(s.iterations), cell(s.finalRolloutSuccess), cell(s.finalValSuccess),
    cell(s.peakValSuccess), cell(s.peakIteration), cell(s.dropFromPeak), cell(s.meanTokensPerSecond, 1), cell(s.totalSeconds, 1), cell(s.teacherShare), cell(s.peakMemoryGib, 2),
  ].join('')}</tr>`);
  return `<table class="summary"><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table.summary{border-collapse:collapse;margin:8px 0}
table.summary th,table.summary td{border:1px solid #ccc;padding:3px 8px}
table.summary th{background:#f4f4f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.na{color:#999;text-align:center}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{border:1px solid #e4e4e4;background:#fff}
svg .title{font-size:13px;font-weight:600}svg .tick,svg .legend,svg .axis,svg .empty{font-size:10px;fill:#444}
svg .grid{stroke:#eee}svg .frame{fill:none;stroke:#999}svg .series{fill:none;stroke-width:1.6}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}
`;

export interface ReportOptions {
  title?: string;
}

/** The report's HTML for `runs` (one run, or several overlaid). */
export function renderReport(runs: readonly RunData[], opts: ReportOptions = {}): string {
  if (runs.length === 0) throw new RangeError('renderReport: no runs');
  const title = opts.title ?? (runs.length === 1 ? `Training run ${runs[0].name}` : `Comparison of ${runs.length} runs`);
  const used = new Set<string>();
  const main: string[] = [];
  for (const spec of CHARTS) {
    const chart = chartFor(runs, spec.title, spec.keys);
    spec.keys.forEach((k) => used.add(k));
    if (chart) main.push(chart);
  }
  const keys = allKeys(runs);
  // Per-task-type success: one chart per type, so runs stay comparable within each.
  const byType = keys.filter((k) => /^(val|rollout)\/success\//.test(k));
  const typeCharts = [...new Set(byType.map((k) => k.slice(k.indexOf('/success/') + '/success/'.length)))].map((type) => {
    const ks = byType.filter((k) => k.endsWith(`/success/${type}`));
    ks.forEach((k) => used.add(k));
    return chartFor(runs, `Success: ${type}`, ks.sort().reverse());
  }).filter((c): c is string => c !== null);
  // Inference and environment servers (a fleet): one chart per quantity, a curve per server.
  const perServer: [RegExp, string][] = [
    [/^server\/.+\/episodes$/, 'Episodes per inference server'],
    [/^server\/.+\/tokens$/, 'Tokens generated per inference server'],
    [/^server\/.+\/busy_seconds$/, 'Seconds busy per inference server'],
    [/^env_server\/.+\/episodes$/, 'Episodes per environment server'],
  ];
  const serverCharts = perServer.map(([re, title]) => {
    const ks = keys.filter((k) => re.test(k));
    ks.forEach((k) => used.add(k));
    return ks.length ? chartFor(runs, title, ks) : null;
  });
  const fleet = [chartFor(runs, 'Weight sync (seconds)', ['time/weight_sync']), chartFor(runs, 'Servers in the pool', ['fleet/servers_in_pool']), ...serverCharts]
    .filter((c): c is string => c !== null);
  for (const k of ['time/weight_sync', 'fleet/servers_in_pool']) used.add(k);
  const other = keys.filter((k) => !used.has(k)).map((k) => chartFor(runs, k, [k])).filter((c): c is string => c !== null);
  const configs = runs.filter((r) => r.config).map((r) => `<details><summary>${escapeXml(r.name)}</summary><pre>${escapeXml(JSON.stringify(r.config, null, 2))}</pre></details>`);
  return [
    '<!DOCTYPE html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${escapeXml(title)}</title>`,
    `<style>${STYLE}</style></head><body>`,
    `<h1>${escapeXml(title)}</h1>`,
    summaryTable(runs),
    '<h2>Training curves</h2>',
    `<div class="charts">${main.join('')}</div>`,
    typeCharts.length ? `<h2>Success per task type</h2><div class="charts">${typeCharts.join('')}</div>` : '',
    fleet.length ? `<h2>Servers</h2><div class="charts">${fleet.join('')}</div>` : '',
    other.length ? `<h2>Other metrics</h2><div class="charts">${other.join('')}</div>` : '',
    configs.length ? `<h2>Configuration</h2>${configs.join('')}` : '',
    '</body></html>',
    '',
  ].join('\n');
}

/** Writes <runDir>/report.html from its metrics.jsonl; returns the file's path. */
export function writeReport(runDir: string, opts: ReportOptions = {}): string {
  const out = path.join(runDir, REPORT_FILE);
  writeFileAtomic(out, renderReport([readRun(runDir)], opts));
  return out;
}

/** Writes one report overlaying several runs (names default to the directories' names). */
export function writeComparisonReport(runDirs: readonly string[], outFile: string, opts: ReportOptions & { names?: readonly string[] } = {}): string {
  const runs = runDirs.map((d, i) => readRun(d, opts.names?.[i]));
  const names = runs.map((r) => r.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup !== undefined) throw new Error(`writeComparisonReport: two runs are both named "${dup}"; pass distinct names`);
  writeFileAtomic(outFile, renderReport(runs, opts));
  return outFile;
}

