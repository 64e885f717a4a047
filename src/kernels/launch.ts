// Helpers shared by the kernel launchers: uniform packing and grid shapes.

export const MAX_RANK = 8;

/** One f32 and its bits: how Uniforms writes floats among its u32s. */
const floatScratch = new Float32Array(1);
const floatBits = new Uint32Array(floatScratch.buffer);

/**
 * A zeroed uniform block (whole 16-byte rows) as u32s, floats written by their bits.
 * Every dispatch makes one, and in Bun an f32 view over the same bytes cost about
 * 0.25 us (the ArrayBuffer it needs) where the Uint32Array alone took 0.01.
 */
export class Uniforms {
  readonly u: Uint32Array;

  constructor(words: number) {
    this.u = new Uint32Array(Math.ceil(words / 4) * 4);
  }

  /** Word `index` as an f32 (rounded as a Float32Array rounds it). */
  setF(index: number, value: number): void {
    floatScratch[0] = value;
    this.u[index] = floatBits[0];
  }
}

/** A zeroed uniform block of at least `words` u32s (see Uniforms). */
export function uniforms(words: number): Uniforms {
  return new Uniforms(words);
}

/** Workgroups for `n` items at `perGroup` each, folded into 2D past 65535. */
export function grid1d(n: number, perGroup = 256): [number, number] {
  const groups = Math.ceil(n / perGroup);
  if (groups <= 65535) return [groups, 1];
  return [65535, Math.ceil(groups / 65535)];
}

/** Workgroups for `rows` independent rows, one workgroup each, folded into 2D. */
export function gridRows(rows: number): [number, number] {
  return grid1d(rows, 1);
}
