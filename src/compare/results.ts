// The method comparison as data: the table and the curves of docs/RESULTS.md, rebuilt
// from the archived runs (archive.ts) on any machine, no GPU needed.
//
// Per method, over its seeds: final and peak validation success mean ± std; against
// GRPO, the difference in final validation success paired by seed and task with its
// 95% interval (paired_difference.ts); pass@k over the final validation's attempts
// pooled over seeds; seconds per iteration and the teacher's share of the step time.
// Below the table the block sets the order beside a paper's where the environment has
// one (paper_table.ts) and shows what the methods' auxiliary terms saw over the runs
// (run_dynamics.ts).

import * as path from 'node:path';
import { formatMeanStd, meanStd, passAtK, type MeanStd } from '../report/eval_stats.ts';
import type { MetricsRow } from '../report/metrics.ts';
import { lineChart, type Series } from '../report/svg_chart.ts';
import { shippedFile } from '../storage/storage.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import type { ArchivedRun, TaskWins } from './archive.ts';
import { formatDifference, pairedDifference, type PairedDifference } from './paired_difference.ts';
import { paperReference } from './paper_reference.ts';
import { paperMethods, paperSection } from './paper_table.ts';
import { dynamicsSection } from './run_dynamics.ts';
import { count, plural } from './words.ts';

export const BASELINE = 'grpo';

const STEP_PHASES = ['time/rollout', 'time/old_logprobs', 'time/teacher', 'time/reference', 'time/update'];

export interface ResultRow {
  method: string;
  seeds: number[];
  iterations: number[];
  finalVal: MeanStd;
  peakVal: MeanStd;
  /** Versus the baseline, paired by seed and task on the final validation; null for the baseline itself or without shared data. */
  vsBaseline: PairedDifference | null;
  passAtK: Record<number, number>;
  secondsPerIteration: MeanStd;
  teacherShare: MeanStd;
  commits: string[];
}

const valPoints = (rows: readonly MetricsRow[]) =>
  rows.filter((r) => typeof r['val/success'] === 'number').map((r) => [r.iteration as number, r['val/success'] as number] as const);

const sum = (rows: readonly MetricsRow[], key: string) => rows.reduce((a, r) => a + (typeof r[key] === 'number' ? (r[key] as number) : 0), 0);

/** pass@k per task over the attempts pooled across the runs' final validations, averaged over the tasks all runs have. */
export function pooledPassAtK(runs: readonly ArchivedRun[]): Record<number, number> {
  const finals = runs.map((r) => r.validation.final?.tasks).filter((t): t is TaskWins => t !== undefined);
  if (!finals.length) return {};
  const tasks = Object.keys(finals[0]).filter((t) => finals.every((f) => t in f));
  const totals = tasks.map((t) => finals.reduce(([w, n], f) => [w + f[t][0], n + f[t][1]], [0, 0]));
  if (!totals.length) return {};
  const attempts = Math.min(...totals.map(([, n]) => n));
  const out: Record<number, number> = {};
  for (let k = 1; k <= attempts; k *= 2) out[k] = totals.reduce((a, [w, n]) => a + passAtK(n, w, k), 0) / totals.length;
  return out;
}

export function resultRows(runs: readonly ArchivedRun[]): ResultRow[] {
  const methods = [...new Set(runs.map((r) => r.meta.method))];
  methods.sort((a, b) => (a === BASELINE ? -1 : b === BASELINE ? 1 : a.localeCompare(b)));
  const baseline = runs.filter((r) => r.meta.method === BASELINE);
  return methods.map((method) => {
    const mine = runs.filter((r) => r.meta.method === method).sort((a, b) => a.meta.seed - b.meta.seed);
    const vals = mine.map((r) => valPoints(r.rows));
    const withVal = vals.filter((v) => v.length > 0);
    const perIteration = mine.map((r) => {
      const its = r.rows.filter((row) => STEP_PHASES.some((k) => typeof row[k] === 'number')).length;
      return its ? STEP_PHASES.reduce((a, k) => a + sum(r.rows, k), 0) / its : NaN;
    }).filter(Number.isFinite);
    const shares = mine.map((r) => {
      const step = STEP_PHASES.reduce((a, k) => a + sum(r.rows, k), 0);
      return step > 0 ? sum(r.rows, 'time/teacher') / step : NaN;
    }).filter(Number.isFinite);
    return {
      method,
      seeds: mine.map((r) => r.meta.seed),
      iterations: mine.map((r) => r.meta.iterations),
      finalVal: meanStd(withVal.map((v) => v[v.length - 1][1])),
      peakVal: meanStd(withVal.map((v) => Math.max(...v.map((p) => p[1])))),
      vsBaseline: method === BASELINE ? null : pairedDifference(mine, baseline),
      passAtK: pooledPassAtK(mine),
      secondsPerIteration: meanStd(perIteration),
      teacherShare: meanStd(shares),
      commits: [...new Set(mine.flatMap((r) => madeBy(r).map((m) => shortCommit(m.commit))))],
    };
  });
}

/** The commits and commands that made a run: each segment's (--time-limit, then --resume), or the one that finished it in archives without segments. */
const madeBy = (r: ArchivedRun): { commit: string; command: string }[] => (r.meta.segments?.length ? r.meta.segments : [{ commit: r.meta.commit, command: r.meta.command }]);

const fmt = (m: MeanStd) => (Number.isFinite(m.mean) ? (m.n > 1 ? formatMeanStd(m) : m.mean.toFixed(3)) : '–');

export function renderResultsTable(rows: readonly ResultRow[]): string {
  const ks = [...new Set(rows.flatMap((r) => Object.keys(r.passAtK).map(Number)))].sort((a, b) => a - b);
  const head = ['method', 'seeds', 'iterations', 'final val success', 'peak val success', `final vs ${BASELINE}, points (95% interval)`, ...ks.map((k) => `pass@${k}`), 's / iteration', 'teacher share'];
  const lines = rows.map((r) => [
    r.method, r.seeds.join(', '), r.iterations.join(', '), fmt(r.finalVal), fmt(r.peakVal),
    r.vsBaseline ? formatDifference(r.vsBaseline) : '–',
    ...ks.map((k) => (r.passAtK[k] === undefined ? '–' : r.passAtK[k].toFixed(3))),
    Number.isFinite(r.secondsPerIteration.mean) ? r.secondsPerIteration.mean.toFixed(2) : '–',
    Number.isFinite(r.teacherShare.mean) ? r.teacherShare.mean.toFixed(3) : '–',
  ]);
  return [head, head.map(() => '---'), ...lines].map((c) => `| ${c.join(' | ')} |`).join('\n') + '\n';
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

/** Validation success over iterations, the mean over each method's seeds at the iterations all its seeds reached. */
export function validationCurves(runs: readonly ArchivedRun[], title: string): string {
  const rows = resultRows(runs);
  const series: Series[] = rows.map((row, i) => {
    const curves = runs.filter((r) => r.meta.method === row.method).map((r) => new Map(valPoints(r.rows)));
    const iters = [...curves[0].keys()].filter((it) => curves.every((c) => c.has(it))).sort((a, b) => a - b);
    return {
      name: `${row.method} (${curves.length} seed${curves.length > 1 ? 's' : ''})`,
      color: PALETTE[i % PALETTE.length],
      points: iters.map((it) => [it, curves.reduce((a, c) => a + c.get(it)!, 0) / curves.length] as const),
      markers: true,
    };
  });
  return lineChart({ title, series, width: 560, height: 300, standalone: true });
}

/** Archives record whole hashes (WGT_COMMIT) or short ones; the page names each by its first 7 digits, as git's short form. */
const shortCommit = (commit: string): string => commit.slice(0, 7);

const BEGIN = (env: string) => `<!-- results:${env}:begin (written by \`npx bun run cli results\`; edit the archive, not this block) -->`;
const END = (env: string) => `<!-- results:${env}:end -->`;

/**
 * The generated block of docs/RESULTS.md for one environment's archive: the table and
 * the figure; where the environment's comparison is set beside a paper, the paper's
 * order and ours; and what the methods' terms saw over the runs. `references` is the
 * link from the page to the one that cites the paper.
 */
export function resultsBlock(env: string, runs: readonly ArchivedRun[], figure: string, references = '[docs/REFERENCES.md](REFERENCES.md)'): string {
  const rows = resultRows(runs);
  const reference = paperReference(env);
  const made = runs.flatMap(madeBy);
  const commits = [...new Set(made.map((s) => shortCommit(s.commit)))];
  // Archives before commands were recorded with npx name Bun bare, which a fresh machine lacks on its PATH.
  const commands = [...new Set(made.map((s) => s.command.replace(/^bun /, 'npx bun ')))];
  const lines = [
    BEGIN(env),
    '',
    `${count(runs.length, 'archived run')} (docs/results/${env}/), from ${plural(commits.length, 'commit')} ${commits.map((c) => `\`${c}\``).join(', ')}, made by:`,
    '',
    ...commands.map((c) => `    ${c}`),
    '',
    renderResultsTable(rows).trimEnd(),
    '',
    `Validation success, mean over seeds: [${figure}](${figure})`,
    '',
    ...(reference ? [paperSection(reference, runs, references), ''] : []),
    dynamicsSection(reference ? paperMethods(reference, runs) : rows.map((r) => r.method), runs),
    '',
    END(env),
  ];
  return lines.join('\n');
}

/** `text` with the environment's generated block replaced (or appended when it has none). */
export function replaceBlock(text: string, env: string, block: string): string {
  const b = text.indexOf(BEGIN(env));
  const e = text.indexOf(END(env));
  if (b >= 0 && e > b) return text.slice(0, b) + block + text.slice(e + END(env).length);
  if (b >= 0 || e >= 0) throw new Error(`the results block for ${env} is opened or closed but not both; fix the markers by hand`);
  return `${text.trimEnd()}\n\n${block}\n`;
}

/**
 * The page an archive's block goes to by default: docs/RESULTS.md of this repository,
 * for its own archive (docs/results/<env> beside that page); null for any other archive,
 * whose block is written only to a page named for it.
 */
export function repositoryPage(archive: string): string | null {
  const page = shippedFile(path.join('docs', 'RESULTS.md'));
  if (page === null) return null;
  const own = path.join(path.dirname(page), 'results', path.basename(path.resolve(archive)));
  return path.resolve(archive) === path.resolve(own) ? page : null;
}

/** How a page cites this repository's docs/REFERENCES.md: a link from a page beside it, by name from any other. */
function referencesLink(page: string): string {
  const file = shippedFile(path.join('docs', 'REFERENCES.md'));
  return file !== null && path.dirname(path.resolve(file)) === path.dirname(path.resolve(page))
    ? '[docs/REFERENCES.md](REFERENCES.md)'
    : 'docs/REFERENCES.md of webgpu-agent-trainer';
}

/** Writes the figure beside the page and the block into it. */
export function writeResults(env: string, runs: readonly ArchivedRun[], page: string, pageText: string): { figure: string; text: string } {
  const figure = `figures/${env}_methods_validation.svg`;
  writeFileAtomic(path.join(path.dirname(page), figure), validationCurves(runs, `${env}: validation success, mean over seeds`) + '\n');
  const text = replaceBlock(pageText, env, resultsBlock(env, runs, figure, referencesLink(page)));
  writeFileAtomic(page, text);
  return { figure, text };
}
