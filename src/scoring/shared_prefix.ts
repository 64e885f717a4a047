// Sequences that begin alike, found so that a scoring pass can run their common
// beginning once: a self-distillation teacher's prompts open with the same skills
// block for every turn routed to the same cards (about 600 of the bundled household
// model's 960 teacher prompt tokens), and a pass that scored each prompt whole spent
// most of its time on those blocks again and again.
//
// The sequences are sorted by their ids, so that those sharing a beginning lie side
// by side, and the sorted list is cut into runs; a run's prefix is the shortest
// common beginning of neighbours in it (and no longer than any member allows). The
// cut maximises the tokens saved, (members - 1) x prefix a run, less what a group costs
// at least on its own (a prefix pass and a batch), by dynamic programming over the
// sorted order: O(n^2) steps for n sequences (a few million for a household
// iteration's 2,500). Saving tokens is not enough: `groupsThatPay` then keeps only the
// groups whose batches cost less than their members scored whole among the others, in
// the costs the runtime's policy gives (`scoring`).

import type { ScoringCosts } from '../gpu/kernel_policy.ts';
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

/**
 * The groups whose batches cost less than their members scored whole among the other
 * sequences, where a batch of `rows` each `length` long costs `batch + rows x longest`
 * and a batch after a prefix `batch + prefixPass + prefix + rows x (row + longest rest)`.
 * A group's batches pad each row's rest to their longest, so members of very different
 * lengths can pad more than the prefix saves, and a small group pays a batch and a
 * prefix pass of its own. Members scored whole join batches of similar lengths, which
 * pad little: their lengths, and their share of `budget`-token batches, stand for that
 * cost. `split` cuts a group's members into batches as the caller will; a group kept
 * comes with them, and the members of one that does not pay go back to `alone`.
 */
export function groupsThatPay(
  { groups, alone }: { groups: readonly PrefixGroup[]; alone: readonly number[] },
  lengths: readonly number[], budget: number, split: (members: readonly number[]) => number[][], costs: ScoringCosts,
): { groups: (PrefixGroup & { batches: number[][] })[]; alone: number[] } {
  const kept: (PrefixGroup & { batches: number[][] })[] = [];
  const back: number[] = [];
  for (const g of groups) {
    const batches = split(g.members);
    const after = batches.reduce((n, rows) => {
      const rest = Math.max(...rows.map((i) => lengths[i])) - g.prefix;
      return n + costs.batch + costs.prefixPass + g.prefix + rows.length * (costs.row + rest);
    }, 0);
    const tokens = g.members.reduce((n, i) => n + lengths[i], 0);
    if (after < tokens * (1 + costs.batch / budget)) kept.push({ ...g, batches });
    else back.push(...g.members);
  }
  return { groups: kept, alone: [...alone, ...back] };
}

/** What sharedPrefixGroups takes as a group's least cost under `costs`. */
export const groupOverhead = (costs: ScoringCosts) => costs.batch + costs.prefixPass;
