// Evaluation statistics (docs/ALGORITHMS.md section 4): success mean ± std
// (n - 1) across evaluation seeds, the unbiased pass@k estimator per task averaged over
// tasks, both overall and per task type; and the stability of a validation curve
// (peak against final).

export interface MeanStd {
  mean: number;
  /** Sample standard deviation (n - 1); NaN for fewer than two values. */
  std: number;
  n: number;
}

export function meanStd(values: readonly number[]): MeanStd {
  const n = values.length;
  if (n === 0) return { mean: NaN, std: NaN, n };
  const mean = values.reduce((a, b) => a + b, 0) / n;
  const std = n > 1 ? Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)) : NaN;
  return { mean, std, n };
}

/**
 * Unbiased pass@k from n attempts with c successes: 1 - C(n-c, k) / C(n, k), computed
 * as 1 - prod_{i=0}^{k-1} (n-c-i)/(n-i), which never forms the binomials (no overflow).
 */
export function passAtK(n: number, c: number, k: number): number {
  if (!(Number.isInteger(n) && Number.isInteger(c) && Number.isInteger(k) && n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n)) {
    throw new RangeError(`passAtK: need integers 1 <= k <= n and 0 <= c <= n, got n=${n}, c=${c}, k=${k}`);
  }
  if (n - c < k) return 1;
  let allFail = 1;
  for (let i = 0; i < k; i++) allFail *= (n - c - i) / (n - i);
  return 1 - allFail;
}

/** One evaluation episode. */
export interface EpisodeOutcome {
  /** Identifies the task across seeds (the same task run under several seeds). */
  taskId: string;
  taskType: string;
  /** Which evaluation seed (repeat) this episode belongs to. */
  seed: number;
  won: boolean;
  /** Native score where the environment has one (shop). */
  score?: number;
}

export interface GroupStats {
  tasks: number;
  episodes: number;
  /** Success rate per seed, then mean ± std across seeds. */
  success: MeanStd;
  /** pass@k averaged over tasks, for every requested k no task has fewer attempts than. */
  passAtK: Record<number, number>;
  /** Mean native score per seed, then mean ± std across seeds (null when no episode has a score). */
  score: MeanStd | null;
}

export interface EvalSummary extends GroupStats {
  seeds: number;
  byType: Record<string, GroupStats>;
}

function groupStats(episodes: readonly EpisodeOutcome[], ks: readonly number[]): GroupStats {
  const bySeed = new Map<number, EpisodeOutcome[]>();
  const byTask = new Map<string, EpisodeOutcome[]>();
  const add = <K>(m: Map<K, EpisodeOutcome[]>, k: K, e: EpisodeOutcome) => {
    const list = m.get(k);
    if (list) list.push(e);
    else m.set(k, [e]);
  };
  for (const e of episodes) {
    add(bySeed, e.seed, e);
    add(byTask, e.taskId, e);
  }
  const rate = (es: EpisodeOutcome[]) => es.filter((e) => e.won).length / es.length;
  const seeds = [...bySeed.keys()].sort((a, b) => a - b);
  const success = meanStd(seeds.map((s) => rate(bySeed.get(s)!)));
  const scored = episodes.some((e) => e.score !== undefined);
  const score = scored
    ? meanStd(seeds.map((s) => {
      const es = bySeed.get(s)!;
      return es.reduce((a, e) => a + (e.score ?? 0), 0) / es.length;
    }))
    : null;
  const pass: Record<number, number> = {};
  const minAttempts = Math.min(...[...byTask.values()].map((es) => es.length));
  for (const k of ks) {
    if (k > minAttempts) continue;
    let total = 0;
    for (const es of byTask.values()) total += passAtK(es.length, es.filter((e) => e.won).length, k);
    pass[k] = total / byTask.size;
  }
  return { tasks: byTask.size, episodes: episodes.length, success, passAtK: pass, score };
}

/** Summarises an evaluation over several seeds; pass@k is reported for each k in `ks` that every task has attempts for. */
export function summarizeEval(episodes: readonly EpisodeOutcome[], ks: readonly number[] = [1, 2, 4, 8]): EvalSummary {
  if (episodes.length === 0) throw new RangeError('summarizeEval: no episodes');
  const types = [...new Set(episodes.map((e) => e.taskType))].sort();
  const byType: Record<string, GroupStats> = {};
  for (const t of types) byType[t] = groupStats(episodes.filter((e) => e.taskType === t), ks);
  return { ...groupStats(episodes, ks), seeds: new Set(episodes.map((e) => e.seed)).size, byType };
}

export interface Stability {
  peak: number;
  peakIteration: number;
  final: number;
  finalIteration: number;
  /** peak - final. */
  dropFromPeak: number;
}

/** Peak against final of a curve given as (iteration, value) points; null when it has none. */
export function stability(points: readonly (readonly [number, number])[]): Stability | null {
  const finite = points.filter(([, v]) => Number.isFinite(v));
  if (finite.length === 0) return null;
  let [peakIteration, peak] = finite[0];
  for (const [it, v] of finite) if (v > peak) [peakIteration, peak] = [it, v];
  const [finalIteration, final] = finite[finite.length - 1];
  return { peak, peakIteration, final, finalIteration, dropFromPeak: peak - final };
}

/** "0.412 ± 0.031 (n=8)". */
export function formatMeanStd(m: MeanStd, digits = 3): string {
  return `${m.mean.toFixed(digits)}${Number.isNaN(m.std) ? '' : ` ± ${m.std.toFixed(digits)}`} (n=${m.n})`;
}
