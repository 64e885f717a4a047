import { DTypeError } from './errors.ts';

/** GPU tensors hold 32-bit elements: f32 values, i32/u32 ids and masks. */
export type DType = 'f32' | 'i32' | 'u32';

export type TypedArrayFor<D extends DType> = D extends 'f32' ? Float32Array : D extends 'i32' ? Int32Array : Uint32Array;

export type HostArray = Float32Array | Int32Array | Uint32Array;

export const BYTES_PER_ELEMENT = 4;

export function arrayFor(dtype: DType, buf: ArrayBuffer | number): HostArray {
  const b = typeof buf === 'number' ? new ArrayBuffer(buf * 4) : buf;
  if (dtype === 'f32') return new Float32Array(b);
  if (dtype === 'i32') return new Int32Array(b);
  return new Uint32Array(b);
}

export function dtypeOf(a: HostArray): DType {
  if (a instanceof Float32Array) return 'f32';
  if (a instanceof Int32Array) return 'i32';
  return 'u32';
}

export function expectDType(op: string, what: string, got: DType, ...allowed: DType[]): void {
  if (!allowed.includes(got)) throw new DTypeError(`${op}: ${what} has dtype ${got}, expected ${allowed.join(' or ')}`);
}
