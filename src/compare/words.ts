// The wording of the page `results` writes: counts with their nouns and differences in
// points, said the same way in every table and sentence of the generated block.

export const plural = (n: number, noun: string): string => (n === 1 ? noun : `${noun}s`);
export const count = (n: number, noun: string): string => `${n} ${plural(n, noun)}`;

/** A success-rate difference in percentage points with its sign, a true minus for negatives. */
export const points = (v: number): string => `${v >= 0 ? '+' : '−'}${Math.abs(100 * v).toFixed(1)}`;

/** A value to `digits` decimals with a true minus, "–" where there is none. */
export const signed = (v: number, digits = 3): string => (Number.isFinite(v) ? `${v < 0 ? '−' : ''}${Math.abs(v).toFixed(digits)}` : '–');

/** `a, b and c` (or `a, b or c`). */
export function list(items: readonly string[], conjunction: 'and' | 'or' = 'and'): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} ${conjunction} ${items[items.length - 1]}`;
}
