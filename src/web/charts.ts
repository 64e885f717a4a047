// The page's live charts, drawn by the report's own SVG line charts from the rows of
// metrics.jsonl: success (training and validation), the policy loss, the KL to the
// reference, the entropy, the method's own terms, and the seconds an iteration took.

import type { MetricsRow } from '../report/metrics.ts';
import { lineChart, type Series } from '../report/svg_chart.ts';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

interface ChartSpec {
  title: string;
  keys: (rows: readonly MetricsRow[]) => string[];
}

const fixed = (...keys: string[]) => () => keys;

const keysOf = (rows: readonly MetricsRow[]) => [...new Set(rows.flatMap((r) => Object.keys(r)))].sort();

/** The method's own terms: metrics under the method's name (sdar/*, rlsd/*, ...) or the teacher's. */
const METHOD_TERMS = /^(?!actor|rollout|val|val_noskills|time|tokens|throughput|memory|sync|server|env_server|fleet|teacher\/val)[a-z_]+\//;

const CHARTS: ChartSpec[] = [
  { title: 'Success rate', keys: fixed('rollout/success', 'val/success') },
  { title: 'Policy loss', keys: fixed('actor/pg_loss') },
  { title: 'KL to reference', keys: fixed('actor/kl') },
  { title: 'Entropy', keys: fixed('actor/entropy') },
  { title: "The method's own terms", keys: (rows) => keysOf(rows).filter((k) => METHOD_TERMS.test(k)) },
  { title: 'Seconds per iteration', keys: fixed('time/iteration', 'time/rollout', 'time/update') },
];

function series(rows: readonly MetricsRow[], keys: readonly string[]): Series[] {
  return keys
    .filter((k) => rows.some((r) => typeof r[k] === 'number'))
    .map((k, i) => ({
      name: k,
      color: COLORS[i % COLORS.length],
      points: rows.filter((r) => k in r).map((r) => [r.iteration as number, r[k]] as const),
      markers: k.startsWith('val/') || rows.length < 20,
    }));
}

/** The charts' SVG text for the rows so far; charts with nothing to draw yet are left out. */
export function chartsSvg(rows: readonly MetricsRow[]): string[] {
  return CHARTS.flatMap((c) => {
    const s = series(rows, c.keys(rows));
    return s.length ? [lineChart({ title: c.title, series: s, width: 420, height: 220, standalone: true })] : [];
  });
}
