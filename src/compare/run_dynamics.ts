// Why the methods end in the order they do, read from what the archive keeps of every
// iteration: the teacher-student gap the self-distillation terms work on, and what
// each term made of it (the gate of SDAR, OPSD and GRPO+OPSD, the clipped weights of
// RLSD), as means over a window at the start, the middle and the end of the runs,
// then over seeds. Runs archived before a key was kept (archive.ts) have no value for
// it and show "–", as do methods that do not log it.

import type { MetricsRow } from '../report/metrics.ts';
import { list, signed } from './words.ts';

export interface DynamicsKey {
  key: string;
  /** What the number is, said under the table. */
  meaning: string;
}

/** The per-iteration metrics the table reads; archive.ts keeps them for this table. */
export const DYNAMICS_KEYS: readonly DynamicsKey[] = [
  { key: 'teacher/gap', meaning: 'the mean over the sampled tokens of lT − lold, the teacher\'s log-prob (these weights reading the skill cards) less the rollout policy\'s: negative where the teacher finds the student\'s tokens less likely than the student did' },
  { key: 'sdar/gate_mean', meaning: 'the mean over tokens of the gate σ(β·(lT − lθ)) that weighs the SDAR term (OPSD\'s too; GRPO+OPSD\'s is 0.5 on every token)' },
  { key: 'sdar/gate_above_half', meaning: 'the share of tokens whose gate exceeds 0.5, those the teacher likes better than the student, which the term pulls up at more than half strength (0 for GRPO+OPSD, whose gate is 0.5 throughout)' },
  { key: 'rlsd/clip_frac', meaning: 'the share of tokens whose RLSD advantage weight exp(±(lT − lold)) is clipped to [0.8, 1.2], where the teacher moves the advantage most (its λ falls from 0.5 to 0 over 100 iterations, and iteration 100 runs no teacher)' },
];

/** A window of iterations, both ends included. */
export interface Window {
  from: number;
  to: number;
}

/** The first, the middle and the last `width` iterations of a run of `iterations`: 1-10, 41-50 and 91-100 for 100. */
export function dynamicsWindows(iterations: number, width = 10): Window[] {
  const w = Math.min(width, Math.max(1, Math.floor(iterations / 3)));
  const half = Math.max(w, Math.floor(iterations / 2));
  return [{ from: 1, to: w }, { from: half - w + 1, to: half }, { from: iterations - w + 1, to: iterations }];
}

/** The mean of `key` over the rows of a window that have it; NaN where none does. */
export function windowMean(rows: readonly MetricsRow[], key: string, window: Window): number {
  const vals = rows
    .filter((r) => typeof r.iteration === 'number' && r.iteration >= window.from && r.iteration <= window.to)
    .map((r) => r[key])
    .filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return vals.length ? vals.reduce((a, v) => a + v, 0) / vals.length : NaN;
}

export interface DynamicsRow {
  method: string;
  seeds: number;
  /** Per key of DYNAMICS_KEYS, per window: the mean over the seeds that have the key there (NaN: none has). */
  values: number[][];
}

/** What this table reads of an archived run (archive.ts ArchivedRun, which keeps the keys this module names). */
export interface RunMetrics {
  meta: { method: string; plannedIterations: number };
  rows: readonly MetricsRow[];
}

export function dynamicsRows(methods: readonly string[], runs: readonly RunMetrics[], windows: readonly Window[]): DynamicsRow[] {
  return methods.map((method) => {
    const mine = runs.filter((r) => r.meta.method === method);
    return {
      method,
      seeds: mine.length,
      values: DYNAMICS_KEYS.map(({ key }) => windows.map((w) => {
        const means = mine.map((r) => windowMean(r.rows, key, w)).filter(Number.isFinite);
        return means.length ? means.reduce((a, v) => a + v, 0) / means.length : NaN;
      })),
    };
  });
}

const span = (w: Window) => (w.from === w.to ? `${w.from}` : `${w.from}-${w.to}`);

export function renderDynamicsTable(rows: readonly DynamicsRow[], windows: readonly Window[]): string {
  const head = ['method', 'seeds', ...DYNAMICS_KEYS.map((k) => `${k.key}, ${windows.map(span).join(' / ')}`)];
  const lines = rows.map((r) => [r.method, String(r.seeds), ...r.values.map((perWindow) => perWindow.map((v) => signed(v)).join(' / '))]);
  return [head, head.map(() => '---'), ...lines].map((c) => `| ${c.join(' | ')} |`).join('\n') + '\n';
}

/** The part of the generated block that explains the ordering, for the methods in the page's order. */
export function dynamicsSection(methods: readonly string[], runs: readonly RunMetrics[]): string {
  const iterations = Math.max(1, ...runs.map((r) => r.meta.plannedIterations));
  const windows = dynamicsWindows(iterations);
  const held = (key: string) => runs.some((r) => r.rows.some((row) => typeof row[key] === 'number'));
  const none = DYNAMICS_KEYS.map((k) => k.key).filter((k) => !held(k));
  return [
    `**What the terms saw.** Per method, each key's mean over iterations ${list(windows.map(span))} of every run, then over its seeds.`,
    '',
    renderDynamicsTable(dynamicsRows(methods, runs, windows), windows).trimEnd(),
    '',
    ...DYNAMICS_KEYS.map((k) => `\`${k.key}\`: ${k.meaning}.`).flatMap((s) => [s, '']),
    `"–": the runs hold no value: the method does not log the key, or its runs were archived before archive.ts kept it${
      none.length ? ` (no run of this archive holds ${list(none.map((k) => `\`${k}\``), 'or')} yet)` : ''}. Skill-SD's term weighs every sampled token, so it has no share to show.`,
  ].join('\n');
}
