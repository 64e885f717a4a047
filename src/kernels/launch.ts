// Helpers shared by the kernel launchers: uniform packing and grid shapes.

export const MAX_RANK = 8;

/**
 * A zeroed uniform block (whole 16-byte rows) as u32s, with f32 and i32 views over the
 * same bytes made when first asked for: every dispatch makes a block, most launchers
 * write only u32s, and three typed arrays over one ArrayBuffer took about 0.3 us where
 * one Uint32Array took 0.01 (Bun on the software GPU's host).
 */
export class Uniforms {
  readonly u: Uint32Array;
  private floats: Float32Array | null = null;
  private ints: Int32Array | null = null;

  constructor(words: number) {
    this.u = new Uint32Array(Math.ceil(words / 4) * 4);
  }

  get f(): Float32Array {
    return (this.floats ??= new Float32Array(this.u.buffer));
  }

  get i(): Int32Array {
    return (this.ints ??= new Int32Array(this.u.buffer));
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
