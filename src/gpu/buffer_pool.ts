// Size-class pool of storage buffers. Sizes round up to a class (powers of two split
// into quarters, so waste stays under 25%); released buffers wait in per-class free
// lists for reuse. GPU memory is invisible to the JavaScript garbage collector, so the
// pool also keeps the accounting that tests and benchmarks read.
//
// Under a budget (`limit`) the pool destroys free buffers only when it must, and as few
// as it can, least recently released first: a destroyed buffer's memory comes back only
// after the GPU has run the work submitted before the destroy and the process has
// waited on the GPU (Dawn's deferred deletion), so destroying a whole free list to make
// room, then creating the same sizes again a layer later, held up to twice the budget
// on the GPU between two waits. The pool counts such memory (`unreclaimed`) until the
// runtime reports a wait that covers it, and reports the most it held, destroyed
// buffers included (`peakHeld`).

import { GpuError } from '../device/errors.ts';

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
  /**
   * Bytes of buffers the pool has destroyed that the GPU may still hold: Dawn returns
   * a destroyed buffer's memory only once the GPU has finished the work submitted
   * before the destroy, and notices that only while the process waits on the GPU.
   */
  unreclaimed: number;
  /** High-water mark of `allocated + unreclaimed`: the most the pool's buffers held on the GPU. */
  peakHeld: number;
  /** Bytes of buffers created and destroyed since the pool started (the churn a budget can cause). */
  createdBytes: number;
  destroyedBytes: number;
}

/** What the pool needs from the queue its buffers are used on. */
export interface PoolQueue {
  /** Submits every command recorded so far; returns the number of submits so far, the last that may use a buffer destroyed now. */
  flush(): number;
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

/** A class past the request's by at most this factor may serve it when the budget is reached. */
const LARGER_CLASS_FACTOR = 2;
/** The bytes buffers of a larger class leave unused, at most, as a share of the budget. */
const WASTE_SHARE = 1 / 8;

export class BufferPool {
  private free = new Map<number, GPUBuffer[]>();
  /** Free buffers, least recently released first: the ones a budget gives back first. */
  private idle = new Set<GPUBuffer>();
  private sizes = new WeakMap<GPUBuffer, number>();
  /** Buffers in use that serve a smaller class than their own, and the bytes they leave unused. */
  private oversized = new Map<GPUBuffer, number>();
  private waste = 0;
  /** Destroyed bytes by the submit count that may still use them, oldest first. */
  private destroyedAt: { submits: number; bytes: number }[] = [];
  readonly stats: PoolStats = {
    inUse: 0, allocated: 0, peakAllocated: 0, peakInUse: 0, liveBuffers: 0, unreclaimed: 0, peakHeld: 0, createdBytes: 0, destroyedBytes: 0,
  };
  /**
   * The memory budget. Reaching it, the pool serves the request from a free buffer of a
   * class up to twice the request's (while the bytes such buffers leave unused stay
   * within an eighth of the budget), else gives back its least recently released free
   * buffers until the request fits, else refuses. It holds at most the budget plus those
   * unused bytes: a budget that fits what the tensors need is never refused because a
   * larger buffer served a smaller one.
   */
  limit = Infinity;

  /**
   * @param queue where the buffers are used: flushed before a buffer is destroyed (a
   *   command still being recorded may name it); without one, buffers are destroyed
   *   as if every use had been submitted and finished.
   */
  constructor(
    private device: GPUDevice,
    private maxBufferSize: number,
    private bindingLimit = Infinity,
    private queue: PoolQueue | null = null,
  ) {}

  acquire(bytes: number, label?: string): GPUBuffer {
    const size = sizeClass(bytes, this.bindingLimit);
    if (size > this.maxBufferSize) {
      throw new GpuError(`${label ?? 'buffer'}: ${bytes} bytes exceeds this adapter's maxBufferSize (${this.maxBufferSize})`);
    }
    let buf = this.take(size);
    if (!buf && this.stats.allocated + this.stats.unreclaimed + size > this.limit) {
      // A new buffer would hold more on the GPU than the budget, at least until the GPU has
      // caught up with what was destroyed: a larger free buffer holds nothing new.
      buf = this.takeLarger(size);
      if (!buf) {
        this.evict(this.stats.allocated + size - this.limit);
        // Refused only when the classes the tensors asked for pass the budget, not for what
        // larger buffers serving smaller requests leave unused.
        if (this.stats.allocated - this.waste + size > this.limit) {
          throw new GpuError(`GPU memory budget: ${label ?? 'a buffer'} needs ${mib(size)} more while ${mib(this.stats.inUse)} is in use, ` +
            `over the budget of ${mib(this.limit)} (gpu.memory, --gpu-memory)`);
        }
      }
    }
    if (!buf) {
      buf = this.device.createBuffer({ size, usage: STORAGE_USAGE, label });
      this.sizes.set(buf, size);
      this.stats.allocated += size;
      this.stats.createdBytes += size;
      this.stats.liveBuffers++;
      this.stats.peakAllocated = Math.max(this.stats.peakAllocated, this.stats.allocated);
      this.stats.peakHeld = Math.max(this.stats.peakHeld, this.stats.allocated + this.stats.unreclaimed);
    }
    this.stats.inUse += this.sizes.get(buf)!;
    this.stats.peakInUse = Math.max(this.stats.peakInUse, this.stats.inUse);
    return buf;
  }

  release(buf: GPUBuffer): void {
    const size = this.sizes.get(buf);
    if (size === undefined) throw new GpuError('released a buffer the pool does not own');
    const unused = this.oversized.get(buf);
    if (unused !== undefined) {
      this.waste -= unused;
      this.oversized.delete(buf);
    }
    this.stats.inUse -= size;
    let list = this.free.get(size);
    if (!list) this.free.set(size, (list = []));
    list.push(buf);
    this.idle.add(buf);
  }

  /** Destroys every free buffer (returns their memory to the driver once the GPU is done with them). */
  trim(): void {
    this.evict(Infinity);
  }

  /**
   * The GPU has finished every submit up to `submits` (and the process has waited on
   * it, so Dawn has noticed): the memory of buffers destroyed before then is back.
   */
  reclaimed(submits: number): void {
    let n = 0;
    for (const d of this.destroyedAt) {
      if (d.submits > submits) break;
      this.stats.unreclaimed -= d.bytes;
      n++;
    }
    if (n) this.destroyedAt.splice(0, n);
  }

  resetPeaks(): void {
    this.stats.peakAllocated = this.stats.allocated;
    this.stats.peakInUse = this.stats.inUse;
    this.stats.peakHeld = this.stats.allocated + this.stats.unreclaimed;
  }

  private take(size: number): GPUBuffer | undefined {
    const buf = this.free.get(size)?.pop();
    if (buf) this.idle.delete(buf);
    return buf;
  }

  /** The free buffer of the smallest class above `size`, up to LARGER_CLASS_FACTOR times it, while the bytes such buffers leave unused stay within WASTE_SHARE of the budget. */
  private takeLarger(size: number): GPUBuffer | undefined {
    let best = Infinity;
    for (const [cls, list] of this.free) {
      if (cls > size && cls <= LARGER_CLASS_FACTOR * size && cls < best && list.length) best = cls;
    }
    if (best === Infinity || this.waste + best - size > WASTE_SHARE * this.limit) return undefined;
    const buf = this.take(best)!;
    this.oversized.set(buf, best - size);
    this.waste += best - size;
    return buf;
  }

  /** Destroys free buffers, least recently released first, until at least `bytes` are gone or none is left. */
  private evict(bytes: number): void {
    if (bytes <= 0 || this.idle.size === 0) return;
    const submits = this.queue?.flush() ?? 0;
    const doomed = new Set<GPUBuffer>();
    let gone = 0;
    for (const buf of this.idle) {
      if (gone >= bytes) break;
      doomed.add(buf);
      gone += this.sizes.get(buf)!;
    }
    const classes = new Set<number>();
    for (const buf of doomed) {
      classes.add(this.sizes.get(buf)!);
      this.idle.delete(buf);
      buf.destroy();
    }
    for (const cls of classes) {
      const left = this.free.get(cls)!.filter((b) => !doomed.has(b));
      if (left.length) this.free.set(cls, left);
      else this.free.delete(cls);
    }
    this.stats.allocated -= gone;
    this.stats.liveBuffers -= doomed.size;
    this.stats.destroyedBytes += gone;
    if (this.queue) {
      this.stats.unreclaimed += gone;
      const last = this.destroyedAt[this.destroyedAt.length - 1];
      if (last?.submits === submits) last.bytes += gone;
      else this.destroyedAt.push({ submits, bytes: gone });
    }
  }
}
