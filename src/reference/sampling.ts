// CPU references for shaders/sampling.wgsl (f64 math on f32 inputs): which tokens are
// candidates after temperature / top-k / top-p, the inverse-CDF draw, the top-n list,
// a decoding loop's step (its rows' progress and stop checks), and per-target
// log-prob + rank. The kernel's launcher owns the settings' meaning
// (kernels/sampling.ts: RowSampling, GREEDY_BELOW); a reference imports nothing from
// the kernels, so callers pass the greedy threshold in.

/** One row's settings, as the kernel's RowSampling. */
export interface SamplingRow {
  temperature: number;
  topP: number;
  topK: number;
  u: number;
  /** How many of the largest logits to list with their log-probs (0 or absent: none). */
  topN?: number;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The kernel's order-preserving u32 key of an f32 value. */
export function floatKey(v: number): number {
  f32[0] = v;
  const b = u32[0];
  return (b & 0x80000000 ? ~b : b | 0x80000000) >>> 0;
}

export interface ReferenceSample {
  id: number;
  logprob: number;
  /** Candidates are the tokens whose key is >= this. */
  threshold: number;
  /** Margin of the top-p decision: |mass of the keys >= threshold - top_p| (renormalised); Infinity without top-p. */
  topPMargin: number;
  /** Distance of u * mass from the nearest edge of the chosen token's CDF interval, relative to the mass. */
  drawMargin: number;
  /** Probability of each token after filtering (0 outside the candidates). */
  probs: Float64Array;
  /** The r.topN largest logits (ties by smaller id) with log-probs under the sampled token's distribution. */
  top: { id: number; logprob: number }[];
}

function logSumExp(z: ArrayLike<number>): number {
  let m = -Infinity;
  for (let i = 0; i < z.length; i++) m = Math.max(m, z[i]);
  let s = 0;
  for (let i = 0; i < z.length; i++) s += Math.exp(z[i] - m);
  return m + Math.log(s);
}

/** The n largest of x (ties by smaller index) with log-probs of softmax(x / t). */
function topList(x: Float32Array, n: number, t: number): { id: number; logprob: number }[] {
  const lse = logSumExp(Array.from(x, (v) => v / t));
  const order = Array.from(x, (_, i) => i).sort((a, b) => x[b] - x[a] || a - b);
  return order.slice(0, Math.min(n, x.length)).map((id) => ({ id, logprob: x[id] / t - lse }));
}

/** One row of `sample`: x the row's logits; temperatures below `greedyBelow` are greedy. */
export function sampleRow(x: Float32Array, r: SamplingRow, greedyBelow: number): ReferenceSample {
  const V = x.length;
  const keys = Array.from(x, floatKey);
  if (!(r.temperature >= greedyBelow)) {
    let id = 0;
    for (let i = 1; i < V; i++) if (x[i] > x[id]) id = i;
    const probs = new Float64Array(V);
    probs[id] = 1;
    const top = topList(x, r.topN ?? 0, 1);
    return { id, logprob: x[id] - logSumExp(x), threshold: keys[id], topPMargin: Infinity, drawMargin: Infinity, probs, top };
  }
  const z = Array.from(x, (v) => v / r.temperature);
  const lse = logSumExp(z);
  const desc = [...new Set(keys)].sort((a, b) => b - a);
  let threshold = 0;
  if (r.topK > 0 && r.topK < V) {
    const sorted = keys.slice().sort((a, b) => b - a);
    threshold = sorted[r.topK - 1];
  }
  let topPMargin = Infinity;
  const w = z.map((v) => Math.exp(v - lse));
  if (r.topP < 1) {
    let mass = 0;
    for (let i = 0; i < V; i++) if (keys[i] >= threshold) mass += w[i];
    let cum = 0;
    for (const k of desc) {
      if (k < threshold) break;
      let here = 0;
      for (let i = 0; i < V; i++) if (keys[i] === k) here += w[i];
      const before = cum;
      cum += here / mass;
      if (cum >= r.topP) {
        threshold = Math.max(threshold, k);
        topPMargin = Math.min(cum - r.topP, r.topP - before);
        break;
      }
    }
  }
  let total = 0;
  for (let i = 0; i < V; i++) if (keys[i] >= threshold) total += w[i];
  const probs = new Float64Array(V);
  for (let i = 0; i < V; i++) if (keys[i] >= threshold) probs[i] = w[i] / total;
  const target = r.u;
  let cum = 0;
  let id = -1;
  let drawMargin = Infinity;
  for (let i = 0; i < V; i++) {
    if (probs[i] === 0) continue;
    const before = cum;
    cum += probs[i];
    id = i;
    if (cum > target) {
      drawMargin = Math.min(cum - target, target - before);
      break;
    }
  }
  return { id, logprob: z[id] - lse, threshold, topPMargin, drawMargin, probs, top: topList(x, r.topN ?? 0, r.temperature) };
}

/** `sample` over rows of logits [rows, vocab]. */
export function sample(logits: Float32Array, vocab: number, rows: readonly SamplingRow[], greedyBelow: number): ReferenceSample[] {
  return rows.map((r, i) => sampleRow(logits.subarray(i * vocab, (i + 1) * vocab), r, greedyBelow));
}

/** A row of `sample_step`: its settings, its seed's uniform for each count, its progress. */
export interface DecodeRowRef {
  temperature: number;
  topP: number;
  topK: number;
  topN?: number;
  /** The uniform of draw t (the kernel hashes it from the seed; callers pass the CPU's). */
  uniform: (t: number) => number;
  produced: number;
  maxTokens: number;
  stopIds: readonly number[];
  done: boolean;
}

/**
 * `sample_step` over rows of logits [rows, vocab]: each row not done samples with
 * u = uniform(produced), counts the token, and is done once the token is one of its
 * stop ids or its count reaches maxTokens; rows change in place. Done rows give null.
 */
export function decodeStep(logits: Float32Array, vocab: number, rows: DecodeRowRef[], greedyBelow: number): (ReferenceSample | null)[] {
  return rows.map((r, i) => {
    if (r.done) return null;
    const out = sampleRow(logits.subarray(i * vocab, (i + 1) * vocab), { ...r, u: r.uniform(r.produced) }, greedyBelow);
    r.produced++;
    r.done = r.stopIds.includes(out.id) || r.produced >= r.maxTokens;
    return out;
  });
}

/** `token_stats`: log-prob under softmax(x / T) and rank (1 + strictly larger logits) of each row's target. */
export function tokenStats(logits: Float32Array, vocab: number, targets: ArrayLike<number>, temperature = 1): { logprobs: Float64Array; ranks: Uint32Array } {
  const rows = targets.length;
  const logprobs = new Float64Array(rows);
  const ranks = new Uint32Array(rows);
  for (let r = 0; r < rows; r++) {
    const x = logits.subarray(r * vocab, (r + 1) * vocab);
    const t = targets[r];
    logprobs[r] = x[t] / temperature - logSumExp(Array.from(x, (v) => v / temperature));
    let above = 0;
    for (let i = 0; i < vocab; i++) if (x[i] > x[t]) above++;
    ranks[r] = above + 1;
  }
  return { logprobs, ranks };
}
