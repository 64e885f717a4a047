// Scalar statistics and input checks shared by the advantage transforms (RLSD,
// AgentOPSD, ADRS, GiGPO). Everything is computed in float64; the transforms round
// to float32 only when they write per-token advantages.

import { ShapeError } from '../tensor/errors.ts';

/** The ε of the z-scores in docs/ALGORITHMS.md section 3 (x − mean) / (std + ε). */
export const Z_EPS = 1e-6;

/** σ(x), without overflow of exp for large |x|. */
export function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

export function logit(p: number): number {
  return Math.log(p) - Math.log1p(-p);
}

export function clip(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}

export function meanOf(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i];
  return s / xs.length;
}

/** Standard deviation with divisor n (0 for fewer than one value). */
export function populationStd(xs: ArrayLike<number>, mean: number): number {
  if (xs.length === 0) return 0;
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += (xs[i] - mean) ** 2;
  return Math.sqrt(s / xs.length);
}

/** Standard deviation with divisor n − 1, 0 for a single value (nothing to spread). */
export function unbiasedStd(xs: ArrayLike<number>, mean: number): number {
  if (xs.length < 2) return 0;
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += (xs[i] - mean) ** 2;
  return Math.sqrt(s / (xs.length - 1));
}

/** (x − mean) / (population std + Z_EPS); a single value scores 0. */
export function zScores(xs: ArrayLike<number>): Float64Array {
  const out = new Float64Array(xs.length);
  if (xs.length === 0) return out;
  const m = meanOf(xs);
  const d = populationStd(xs, m) + Z_EPS;
  for (let i = 0; i < xs.length; i++) out[i] = (xs[i] - m) / d;
  return out;
}

/** Middle value; the lower of the two middle values for an even count, as torch.median. */
export function lowerMedian(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('lowerMedian: no values');
  const s = [...xs].sort((a, b) => a - b);
  return s[(s.length - 1) >> 1];
}

/** Indices of the items sharing each key, in first-seen order. */
export function groupIndices<T>(items: readonly T[], key: (item: T) => string): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  items.forEach((it, i) => {
    const k = key(it);
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  });
  return groups;
}

export interface TokenArrays {
  /** What the values are, for messages ("teacher log-probs"). */
  name: string;
  arrays: readonly Float32Array[];
}

/**
 * Throws unless there is one finite advantage per sample and, for every entry of
 * `perToken`, one array per sample holding one finite value per response token.
 * Messages name `fn`, the sample index and what is wrong.
 */
export function checkTransformInputs(
  fn: string,
  samples: readonly { responseIds: readonly number[] }[],
  adv: Float64Array,
  perToken: readonly TokenArrays[],
): void {
  if (adv.length !== samples.length) throw new ShapeError(`${fn}: ${adv.length} advantages for ${samples.length} samples`);
  for (const p of perToken) {
    if (p.arrays.length !== samples.length) throw new ShapeError(`${fn}: ${p.arrays.length} arrays of ${p.name} for ${samples.length} samples`);
  }
  samples.forEach((s, i) => {
    if (!Number.isFinite(adv[i])) throw new Error(`${fn}: sample ${i}: advantage is ${adv[i]}`);
    const n = s.responseIds.length;
    for (const p of perToken) {
      const a = p.arrays[i];
      if (a.length !== n) throw new ShapeError(`${fn}: sample ${i}: ${a.length} ${p.name} for ${n} response tokens`);
      for (let t = 0; t < n; t++) {
        if (!Number.isFinite(a[t])) throw new Error(`${fn}: sample ${i}: ${p.name}[${t}] is ${a[t]}`);
      }
    }
  });
}

/**
 * Groups sample indices by trajectoryId, each ordered by turn, and throws unless a
 * trajectory's samples share one group and one episode return and carry the distinct
 * turns 0..T−1.
 */
export function trajectoryTurns(
  fn: string,
  samples: readonly { groupId: string; trajectoryId: string; turn: number; episodeReturn: number }[],
): Map<string, number[]> {
  const byTrajectory = groupIndices(samples, (s) => s.trajectoryId);
  for (const [id, idx] of byTrajectory) {
    idx.sort((a, b) => samples[a].turn - samples[b].turn);
    const first = samples[idx[0]];
    idx.forEach((i, k) => {
      const s = samples[i];
      if (s.turn !== k) throw new Error(`${fn}: sample ${i}: trajectory "${id}" has turns ${idx.map((j) => samples[j].turn).join(', ')}, expected 0..${idx.length - 1} once each`);
      if (s.groupId !== first.groupId) throw new Error(`${fn}: sample ${i}: trajectory "${id}" is in groups "${first.groupId}" and "${s.groupId}"`);
      if (s.episodeReturn !== first.episodeReturn) throw new Error(`${fn}: sample ${i}: trajectory "${id}" has episode returns ${first.episodeReturn} and ${s.episodeReturn}`);
    });
  }
  return byTrajectory;
}
