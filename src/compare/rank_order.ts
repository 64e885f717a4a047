// Orders of methods by a score, higher first, and how two such orders agree pair by
// pair: the comparison's own order set beside a paper's (paper_table.ts). Pairs, not a
// single correlation, because the page has to say which methods trade places.

/**
 * 1 where `a` scores higher, −1 where lower, 0 for scores equal up to float rounding
 * (means over seeds of the same values can differ in their last bits).
 */
const compare = (a: number, b: number): number => (Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b)) ? 0 : Math.sign(a - b));

/** Competition ranks (1, 2, 2, 4): one more than the number of higher scores, so equal scores share a rank. */
export function ranks(scores: ReadonlyMap<string, number>): Map<string, number> {
  const all = [...scores.values()];
  return new Map([...scores].map(([key, v]) => [key, 1 + all.filter((u) => compare(u, v) > 0).length]));
}

/** Two keys as the reference orders them: `above` scores higher there (or ties with `below`). */
export interface RankedPair {
  above: string;
  below: string;
}

export interface OrderAgreement {
  /** Pairs both orders put the same way round. */
  same: RankedPair[];
  /** Pairs the other order puts the other way round. */
  swapped: RankedPair[];
  /** Pairs tied in the reference, the other order or both: neither agreement nor reversal. */
  tied: (RankedPair & { tiedIn: 'reference' | 'other' | 'both' })[];
}

/**
 * Every pair of the keys both maps score, classified by whether `other` orders it as
 * `reference` does. Pairs come in the reference's order (its best key's pairs first;
 * keys the reference ties keep their order in `reference`).
 */
export function orderAgreement(reference: ReadonlyMap<string, number>, other: ReadonlyMap<string, number>): OrderAgreement {
  const keys = [...reference.keys()].filter((k) => other.has(k));
  const position = new Map(keys.map((k, i) => [k, i]));
  keys.sort((a, b) => compare(reference.get(b)!, reference.get(a)!) || position.get(a)! - position.get(b)!);
  const out: OrderAgreement = { same: [], swapped: [], tied: [] };
  keys.forEach((above, i) => {
    for (const below of keys.slice(i + 1)) {
      const r = compare(reference.get(above)!, reference.get(below)!);
      const o = compare(other.get(above)!, other.get(below)!);
      if (r === 0 || o === 0) out.tied.push({ above, below, tiedIn: r === 0 && o === 0 ? 'both' : r === 0 ? 'reference' : 'other' });
      else (o === r ? out.same : out.swapped).push({ above, below });
    }
  });
  return out;
}
