import { ShapeError } from './errors.ts';

export type Shape = readonly number[];

export function numel(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function fmt(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

export function checkShape(op: string, shape: Shape): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new ShapeError(`${op}: invalid shape ${fmt(shape)}`);
  }
}

export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Row-major strides. */
export function stridesOf(shape: Shape): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

/** NumPy broadcasting of two shapes. */
export function broadcastShapes(op: string, a: Shape, b: Shape): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new ShapeError(`${op}: shapes ${fmt(a)} and ${fmt(b)} do not broadcast`);
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** Normalises a possibly negative axis. */
export function axisOf(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank) throw new ShapeError(`${op}: axis ${axis} out of range for rank ${rank}`);
  return a;
}

/** Resolves one -1 in a reshape target. */
export function resolveReshape(op: string, from: Shape, to: readonly number[]): number[] {
  const n = numel(from);
  const out = [...to];
  const inferred = out.indexOf(-1);
  if (inferred >= 0) {
    const rest = numel(out.filter((_, i) => i !== inferred));
    if (rest === 0 || n % rest !== 0) throw new ShapeError(`${op}: cannot reshape ${fmt(from)} to ${fmt(to)}`);
    out[inferred] = n / rest;
  }
  checkShape(op, out);
  if (numel(out) !== n) throw new ShapeError(`${op}: cannot reshape ${fmt(from)} (${n} elements) to ${fmt(to)}`);
  return out;
}
