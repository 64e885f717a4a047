// Helpers shared by the kernel launchers: uniform packing and grid shapes.

export const MAX_RANK = 8;

/** A zeroed uniform block with u32 and f32 views over the same bytes. */
export function uniforms(words: number): { u: Uint32Array; f: Float32Array; i: Int32Array } {
  const buf = new ArrayBuffer(Math.ceil(words / 4) * 16);
  return { u: new Uint32Array(buf), f: new Float32Array(buf), i: new Int32Array(buf) };
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
