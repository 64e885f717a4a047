// Sequences that begin alike, found so that a pass can run their common beginning once:
// a self-distillation teacher's prompts open with the same skills block for every turn
// routed to the same cards (about 600 of the bundled household model's 960 teacher
// prompt tokens), a GRPO group's completions continue the same prompt, and a pass that
// ran each sequence whole spent most of its time on those beginnings again and again.
//
// The sequences are sorted by their ids, so that those sharing a beginning lie side
// by side, and the sorted list is cut into runs; a run's prefix is the shortest
// common beginning of neighbours in it (and no longer than any member allows). The
// cut maximises the tokens saved, (members - 1) x prefix a run, less what a group costs
// (its prefix row, padded to the longest prefix of its batch), by dynamic programming
// over the sorted order: O(n^2) steps for n sequences (a few million for a household
// iteration's 2,500). The groups are then packed into batches, several to a batch
// (planSharedPrefixes), and the plan is kept only where it costs less than running
// every sequence whole, in the costs the runtime's policy gives (`scoring`).

import type { ScoringPolicy } from '../gpu/kernel_policy.ts';
import { ShapeError } from '../tensor/errors.ts';

export interface PrefixGroup {
  /** Tokens every member begins with, scored once. */
  prefix: number;
  /** Indices of its sequences, in sorted order. */
  members: number[];
}

function compareIds(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function commonLength(a: ArrayLike<number>, b: ArrayLike<number>, bound: number): number {
  const n = Math.min(a.length, b.length, bound);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Groups of `indices` into `seqs` whose members share a prefix worth scoring once: at
 * most `limits[i]` tokens for sequence i (a scoring pass keeps the position before each
 * scored token out of the prefix), and only where the group saves more than `overhead`
 * tokens. The groups are disjoint; `alone` holds the indices in none, in their given
 * order.
 */
export function sharedPrefixGroups(
  seqs: readonly ArrayLike<number>[], indices: readonly number[], limits: readonly number[], overhead: number,
): { groups: PrefixGroup[]; alone: number[] } {
  if (limits.length !== seqs.length) throw new ShapeError(`sharedPrefixGroups: ${limits.length} limits for ${seqs.length} sequences`);
  const order = [...indices].sort((a, b) => compareIds(seqs[a], seqs[b]) || a - b);
  const n = order.length;
  // link[k]: the prefix that order[k - 1] and order[k] can share.
  const link = new Int32Array(n);
  for (let k = 1; k < n; k++) {
    const a = order[k - 1];
    const b = order[k];
    link[k] = commonLength(seqs[a], seqs[b], Math.min(limits[a], limits[b]));
  }
  // best[j]: the most tokens saved over order[0..j); from[j]: where its last run starts
  // (j - 1 for a sequence left alone).
  const best = new Float64Array(n + 1);
  const from = new Int32Array(n + 1);
  for (let j = 1; j <= n; j++) {
    best[j] = best[j - 1];
    from[j] = j - 1;
    let shared = Infinity;
    for (let i = j - 2; i >= 0; i--) {
      shared = Math.min(shared, link[i + 1]);
      if (shared === 0) break;
      const gain = best[i] + (j - 1 - i) * shared - overhead;
      if (gain > best[j]) {
        best[j] = gain;
        from[j] = i;
      }
    }
  }
  const groups: PrefixGroup[] = [];
  for (let j = n; j > 0; j = from[j]) {
    const i = from[j];
    if (j - i < 2) continue;
    let shared = Infinity;
    for (let k = i + 1; k < j; k++) shared = Math.min(shared, link[k]);
    groups.push({ prefix: shared, members: order.slice(i, j) });
  }
  const grouped = new Set(groups.flatMap((g) => g.members));
  return { groups: groups.reverse(), alone: indices.filter((i) => !grouped.has(i)) };
}

/** A batch of a pass: its sequences, scored whole or after prefixes they share. */
export interface PlannedBatch {
  /** Its sequences, in row order. */
  rows: number[];
  /** After prefixes run once: each prefix's length and how many of `rows`, in order, continue it. */
  prefixes?: { length: number; rows: number }[];
}

export interface SharingPlan {
  batches: PlannedBatch[];
  /** Prefix tokens not run again: (rows - 1) x length of each prefix of each batch. */
  sharedTokens: number;
}

/**
 * `groups` packed into batches of at most `budget` padded tokens, where every row counts
 * its batch's longest prefix and longest rest (its keys and values span both): groups
 * longest prefix first, so a batch's prefixes pad little, and a group's rows longest
 * first. A group that does not fit its batch goes on in the next, which runs its prefix
 * again.
 */
export function packGroups(groups: readonly PrefixGroup[], lengths: readonly number[], budget: number): PlannedBatch[] {
  const batches: PlannedBatch[] = [];
  let cur: Required<PlannedBatch> | null = null;
  let longestPrefix = 0;
  let longestRest = 0;
  for (const g of [...groups].sort((a, b) => b.prefix - a.prefix)) {
    let open: { length: number; rows: number } | null = null;
    for (const i of [...g.members].sort((a, b) => lengths[b] - lengths[a] || a - b)) {
      const rest = lengths[i] - g.prefix;
      if (cur && (cur.rows.length + 1) * (Math.max(longestPrefix, g.prefix) + Math.max(longestRest, rest)) > budget) {
        batches.push(cur);
        cur = null;
      }
      if (!cur) {
        cur = { rows: [], prefixes: [] };
        longestPrefix = longestRest = 0;
        open = null;
      }
      if (!open) cur.prefixes.push((open = { length: g.prefix, rows: 0 }));
      cur.rows.push(i);
      open.rows++;
      longestPrefix = Math.max(longestPrefix, g.prefix);
      longestRest = Math.max(longestRest, rest);
    }
  }
  if (cur) batches.push(cur);
  return batches;
}

/**
 * What a plan's batches cost in tokens of work: each `costs.batch`, and its padded
 * tokens, the prefixes' (prefixes x longest) and the rows' (rows x longest rest, or
 * longest sequence).
 */
export function planCost(batches: readonly PlannedBatch[], lengths: readonly number[], costs: Pick<ScoringPolicy, 'batch'>): number {
  return batches.reduce((n, b) => {
    if (!b.prefixes) return n + costs.batch + b.rows.length * Math.max(...b.rows.map((i) => lengths[i]));
    let longestPrefix = 0;
    let longestRest = 0;
    let at = 0;
    for (const p of b.prefixes) {
      longestPrefix = Math.max(longestPrefix, p.length);
      for (const i of b.rows.slice(at, (at += p.rows))) longestRest = Math.max(longestRest, lengths[i] - p.length);
    }
    return n + costs.batch + b.prefixes.length * longestPrefix + b.rows.length * longestRest;
  }, 0);
}

/**
 * Batches of `indices` into `seqs` for a pass that may run shared prefixes once: the
 * groups sharedPrefixGroups finds (at most `limits[i]` tokens of sequence i), packed
 * (packGroups), and the other sequences cut as `whole` cuts them; or, where that costs
 * no less (planCost) or `costs.sharePrefixes` is off, every sequence as `whole` cuts them.
 */
export function planSharedPrefixes(
  seqs: readonly ArrayLike<number>[], indices: readonly number[], limits: readonly number[], budget: number,
  whole: (indices: readonly number[]) => number[][], costs: ScoringPolicy,
): SharingPlan {
  const lengths = seqs.map((s) => s.length);
  const plain = whole(indices).map((rows) => ({ rows }));
  if (!costs.sharePrefixes) return { batches: plain, sharedTokens: 0 };
  const { groups, alone } = sharedPrefixGroups(seqs, indices, limits, costs.group);
  if (!groups.length) return { batches: plain, sharedTokens: 0 };
  const batches: PlannedBatch[] = [...packGroups(groups, lengths, budget), ...whole(alone).map((rows) => ({ rows }))];
  if (planCost(batches, lengths, costs) >= planCost(plain, lengths, costs)) return { batches: plain, sharedTokens: 0 };
  const sharedTokens = batches.reduce((n, b) => n + (b.prefixes ?? []).reduce((m, p) => m + (p.rows - 1) * p.length, 0), 0);
  return { batches, sharedTokens };
}
