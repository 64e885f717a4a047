// The string matching WebShop's reward relies on: thefuzz's token_set_ratio with its
// default preprocessing (ASCII only, non-alphanumerics to spaces, lower case), scored
// on rapidfuzz's Indel ratio and rounded to an integer the way Python rounds, and
// normalize_color (the first known color contained in the string).

import { COLOR_SET } from './vocabulary.ts';

function fullProcess(s: string): string {
  return s.replace(/[^\x00-\x7f]/g, '').replace(/[^A-Za-z0-9_]/g, ' ').toLowerCase().trim();
}

function lcsLength(a: string, b: string): number {
  let prev = new Int32Array(b.length + 1);
  let cur = new Int32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      cur[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], cur[j - 1]);
    }
    [prev, cur] = [cur, prev];
  }
  return prev[b.length];
}

function indelDistance(a: string, b: string): number {
  return a.length + b.length - 2 * lcsLength(a, b);
}

function normDistance(dist: number, lensum: number): number {
  return lensum > 0 ? 100 - (100 * dist) / lensum : 100;
}

/** Python's round(): halves go to the even neighbour. */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const frac = x - floor;
  if (frac > 0.5) return floor + 1;
  if (frac < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** thefuzz.fuzz.token_set_ratio(a, b) in [0, 100]. */
export function tokenSetRatio(a: string, b: string): number {
  const tokensA = new Set(fullProcess(a).split(/\s+/).filter((t) => t !== ''));
  const tokensB = new Set(fullProcess(b).split(/\s+/).filter((t) => t !== ''));
  if (tokensA.size === 0 || tokensB.size === 0) return 0;
  const intersect = [...tokensA].filter((t) => tokensB.has(t));
  const diffAB = [...tokensA].filter((t) => !tokensB.has(t)).sort();
  const diffBA = [...tokensB].filter((t) => !tokensA.has(t)).sort();
  if (intersect.length > 0 && (diffAB.length === 0 || diffBA.length === 0)) return 100;
  const ab = diffAB.join(' ');
  const ba = diffBA.join(' ');
  const sectLen = intersect.join(' ').length;
  const sep = sectLen > 0 ? 1 : 0;
  const sectAbLen = sectLen + sep + ab.length;
  const sectBaLen = sectLen + sep + ba.length;
  let best = normDistance(indelDistance(ab, ba), sectAbLen + sectBaLen);
  if (sectLen > 0) {
    best = Math.max(best, normDistance(sep + ab.length, sectLen + sectAbLen), normDistance(sep + ba.length, sectLen + sectBaLen));
  }
  return roundHalfEven(best);
}

/** WebShop's match threshold: a score above 85 counts as the same attribute or option. */
export function fuzzyMatch(a: string, b: string): boolean {
  return tokenSetRatio(a, b) > 85;
}

export function normalizeColor(value: string): string {
  for (const color of COLOR_SET) if (value.includes(color)) return color;
  return value;
}
