// GPU-resident tensors. Every tensor is contiguous, row-major; `reshape` makes a view
// that shares its storage (reference-counted), everything else copies.

import { runtime, type Runtime } from '../gpu/runtime.ts';
import { arrayFor, BYTES_PER_ELEMENT, type DType, type HostArray } from './dtype.ts';
import { DisposedError, ShapeError } from './errors.ts';
import { track } from './scope.ts';
import { checkShape, fmt, numel, type Shape } from './shape.ts';

export class Storage {
  refs = 1;
  constructor(
    readonly rt: Runtime,
    readonly buffer: GPUBuffer,
    readonly bytes: number,
  ) {}

  release(): void {
    if (--this.refs === 0) this.rt.pool.release(this.buffer);
  }
}

export interface GradNode {
  readonly op: string;
  readonly inputs: readonly Tensor[];
  /** Gradients of the inputs given the output's gradient (null where none is needed). */
  backward(grad: Tensor): (Tensor | null)[];
}

let nextId = 1;

export class Tensor {
  readonly isTensor = true;
  readonly id = nextId++;
  readonly shape: Shape;
  readonly size: number;
  requiresGrad = false;
  grad: Tensor | null = null;
  node: GradNode | null = null;
  name: string | undefined;
  private _storage: Storage | null;

  constructor(storage: Storage, shape: Shape, readonly dtype: DType) {
    this._storage = storage;
    // A copy, so the caller's array can change without changing the tensor; not frozen
    // (the type is readonly), as Object.freeze cost about 0.4 us per tensor in Bun and
    // a decode step makes a few dozen tensors.
    this.shape = [...shape];
    this.size = numel(shape);
    track(this);
  }

  get rank(): number {
    return this.shape.length;
  }

  get disposed(): boolean {
    return this._storage === null;
  }

  get storage(): Storage {
    if (!this._storage) throw new DisposedError(`tensor${this.name ? ` "${this.name}"` : ''} ${fmt(this.shape)} ${this.dtype} used after dispose`);
    return this._storage;
  }

  get buffer(): GPUBuffer {
    return this.storage.buffer;
  }

  get bytes(): number {
    return this.size * BYTES_PER_ELEMENT;
  }

  /** The buffer binding covering exactly this tensor's elements. */
  get binding(): { buffer: GPUBuffer; offset: number; size: number } {
    return { buffer: this.buffer, offset: 0, size: Math.max(this.bytes, 4) };
  }

  dispose(): void {
    if (!this._storage) return;
    this._storage.release();
    this._storage = null;
    this.node = null;
    this.grad?.dispose();
    this.grad = null;
  }

  /** A view with another shape over the same storage (no autograd; see ops.reshape). */
  view(shape: Shape): Tensor {
    const s = this.storage;
    s.refs++;
    return new Tensor(s, shape, this.dtype);
  }

  async toArray(): Promise<HostArray> {
    const s = this.storage;
    return arrayFor(this.dtype, await s.rt.read(s.buffer, 0, this.bytes));
  }

  async item(): Promise<number> {
    if (this.size !== 1) throw new ShapeError(`item(): tensor ${fmt(this.shape)} has ${this.size} elements, not 1`);
    return (await this.toArray())[0];
  }

  toString(): string {
    return `Tensor(${fmt(this.shape)}, ${this.dtype}${this.requiresGrad ? ', requiresGrad' : ''})`;
  }
}

/** An uninitialised tensor. */
export function empty(shape: Shape, dtype: DType = 'f32', rt: Runtime = runtime()): Tensor {
  checkShape('empty', shape);
  const bytes = Math.max(numel(shape), 1) * BYTES_PER_ELEMENT;
  return new Tensor(new Storage(rt, rt.pool.acquire(bytes), bytes), shape, dtype);
}

export function zeros(shape: Shape, dtype: DType = 'f32', rt: Runtime = runtime()): Tensor {
  const t = empty(shape, dtype, rt);
  rt.clear(t.buffer, 0, Math.max(t.bytes, 4));
  return t;
}

/** A tensor holding `data` (a typed array or numbers, read as `dtype`). */
export function tensor(data: HostArray | readonly number[], shape?: Shape, dtype?: DType, rt: Runtime = runtime()): Tensor {
  const dt: DType = dtype ?? (data instanceof Int32Array ? 'i32' : data instanceof Uint32Array ? 'u32' : 'f32');
  const host = ArrayBuffer.isView(data) && dtypeMatches(data, dt) ? data : arrayFrom(dt, data);
  const sh = shape ?? [host.length];
  checkShape('tensor', sh);
  if (numel(sh) !== host.length) throw new ShapeError(`tensor: ${host.length} values do not fill shape ${fmt(sh)}`);
  const t = empty(sh, dt, rt);
  rt.upload(t.buffer, 0, host);
  return t;
}

function dtypeMatches(a: HostArray, dt: DType): boolean {
  return (dt === 'f32' && a instanceof Float32Array) || (dt === 'i32' && a instanceof Int32Array) || (dt === 'u32' && a instanceof Uint32Array);
}

function arrayFrom(dt: DType, data: ArrayLike<number>): HostArray {
  const out = arrayFor(dt, data.length);
  for (let i = 0; i < data.length; i++) out[i] = data[i];
  return out;
}
