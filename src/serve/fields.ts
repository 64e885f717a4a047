// Typed reads of request body fields: a missing field takes its default, a field of the
// wrong type or range is a 400 that names it.

import { ApiError } from './http.ts';

export type Body = Record<string, unknown>;

const describe = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'string' ? `"${v.slice(0, 40)}"` : typeof v === 'object' ? 'an object' : String(v));

function bad(name: string, want: string, got: unknown): ApiError {
  return new ApiError(400, `field "${name}" must be ${want}, got ${describe(got)}`, name);
}

/** An integer in [min, max]; null and absent give the default. */
export function intField(body: Body, name: string, dflt: number | null, min = -Infinity, max = Infinity): number | null {
  const v = body[name];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    const range = `${min > -Infinity ? ` >= ${min}` : ''}${max < Infinity ? `${min > -Infinity ? ' and' : ''} <= ${max}` : ''}`;
    throw bad(name, `an integer${range}`, v);
  }
  return v;
}

export function numberField(body: Body, name: string, dflt: number, ok: (x: number) => boolean, want: string): number {
  const v = body[name];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw bad(name, want, v);
  return v;
}

export function boolField(body: Body, name: string, dflt: boolean): boolean {
  const v = body[name];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw bad(name, 'true or false', v);
  return v;
}

export function stringField(body: Body, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw bad(name, 'a string', v);
  return v;
}

export function requiredString(body: Body, name: string): string {
  const v = stringField(body, name);
  if (v === undefined || v === '') throw new ApiError(400, `field "${name}" is required (a non-empty string)`, name);
  return v;
}

/** Token ids in [0, vocab), named as field[i] in errors. */
export function tokenIds(v: unknown, name: string, vocab: number): number[] {
  if (!Array.isArray(v)) throw bad(name, 'an array of token ids', v);
  v.forEach((id, i) => {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocab) {
      throw new ApiError(400, `${name}[${i}] = ${describe(id)} is not a token id in [0, ${vocab})`, name);
    }
  });
  return v as number[];
}

/** A string or a list of strings (stop). */
export function stringList(body: Body, name: string): string[] {
  const v = body[name];
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.some((s) => typeof s !== 'string' || s === '')) throw bad(name, 'a non-empty string or a list of them', v);
  return list as string[];
}

/** Fields we do not implement are accepted at their neutral value only, so a request never silently means something else. */
export function neutralOnly(body: Body, name: string, neutral: (v: unknown) => boolean, what: string): void {
  const v = body[name];
  if (v !== undefined && v !== null && !neutral(v)) throw new ApiError(400, `field "${name}" is not supported by this server (${what})`, name);
}
