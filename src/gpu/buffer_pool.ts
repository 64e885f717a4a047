// Size-class pool of storage buffers. Sizes round up to a class (powers of two split
// into quarters, so waste stays under 25%); released buffers wait in per-class free
// lists for reuse. GPU memory is invisible to the JavaScript garbage collector, so the
// pool also keeps the accounting that tests and benchmarks read.

import { GpuError } from './errors.ts';

const STORAGE_USAGE = 0x80 /* STORAGE */ | 0x04 /* COPY_SRC */ | 0x08; /* COPY_DST */

export interface PoolStats {
  /** Bytes in buffers handed out and not yet released. */
  inUse: number;
  /** Bytes in buffers the pool owns, free or in use. */
  allocated: number;
  /** High-water mark of `allocated`. */
  peakAllocated: number;
  /** High-water mark of `inUse`. */
  peakInUse: number;
  liveBuffers: number;
}

const sizes = new WeakMap<GPUBuffer, number>();

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/**
 * `buf.size`, remembered: the getter is a call into the native bindings (about 0.7 us
 * on the H200 machine's host), and a decode step's launchers check a few hundred
 * buffers.
 */
export function bufferSize(buf: GPUBuffer): number {
  let size = sizes.get(buf);
  if (size === undefined) sizes.set(buf, (size = buf.size));
  return size;
}

/**
 * The class of a request. A class above `bindingLimit` (the largest storage binding)
 * shrinks to the request rounded to 256 bytes: kernels bind whole buffers, so a 1.9 GiB
 * tensor (a 248k-token vocabulary's embedding) must not land in the 2 GiB class.
 */
export function sizeClass(bytes: number, bindingLimit = Infinity): number {
  const n = Math.max(bytes, 256);
  const pow = 2 ** Math.floor(Math.log2(n));
  if (pow === n) return n;
  const quarter = pow / 4;
  const cls = pow + Math.ceil((n - pow) / quarter) * quarter;
  return cls > bindingLimit ? Math.ceil(n / 256) * 256 : cls;
}

export class BufferPool {
  private free = new Map<number, GPUBuffer[]>();
  private sizes = new WeakMap<GPUBuffer, number>();
  readonly stats: PoolStats = { inUse: 0, allocated: 0, peakAllocated: 0, peakInUse: 0, liveBuffers: 0 };
  /**
   * The memory budget: the pool never holds more. Reaching it, the pool first gives
   * its free buffers back (through `onPressure`, which must also end any use of them
   * still being recorded), then refuses.
   */
  limit = Infinity;
  onPressure: (() => void) | null = null;

  constructor(
    private device: GPUDevice,
    private maxBufferSize: number,
    private bindingLimit = Infinity,
  ) {}

  acquire(bytes: number, label?: string): GPUBuffer {
    const size = sizeClass(bytes, this.bindingLimit);
    if (size > this.maxBufferSize) {
      throw new GpuError(`${label ?? 'buffer'}: ${bytes} bytes exceeds this adapter's maxBufferSize (${this.maxBufferSize})`);
    }
    const list = this.free.get(size);
    let buf = list?.pop();
    if (!buf) {
      if (this.stats.allocated + size > this.limit) {
        if (this.onPressure) this.onPressure();
        else this.trim();
        if (this.stats.allocated + size > this.limit) {
          throw new GpuError(`GPU memory budget: ${label ?? 'a buffer'} needs ${mib(size)} more while ${mib(this.stats.inUse)} is in use, ` +
            `over the budget of ${mib(this.limit)} (gpu.memory, --gpu-memory)`);
        }
      }
      buf = this.device.createBuffer({ size, usage: STORAGE_USAGE, label });
      this.sizes.set(buf, size);
      this.stats.allocated += size;
      this.stats.liveBuffers++;
      this.stats.peakAllocated = Math.max(this.stats.peakAllocated, this.stats.allocated);
    }
    this.stats.inUse += size;
    this.stats.peakInUse = Math.max(this.stats.peakInUse, this.stats.inUse);
    return buf;
  }

  release(buf: GPUBuffer): void {
    const size = this.sizes.get(buf);
    if (size === undefined) throw new GpuError('released a buffer the pool does not own');
    this.stats.inUse -= size;
    let list = this.free.get(size);
    if (!list) this.free.set(size, (list = []));
    list.push(buf);
  }

  /** Destroys every free buffer (returns their memory to the driver). */
  trim(): void {
    for (const list of this.free.values()) {
      for (const buf of list) {
        this.stats.allocated -= this.sizes.get(buf)!;
        this.stats.liveBuffers--;
        buf.destroy();
      }
    }
    this.free.clear();
  }

  resetPeaks(): void {
    this.stats.peakAllocated = this.stats.allocated;
    this.stats.peakInUse = this.stats.inUse;
  }
}
