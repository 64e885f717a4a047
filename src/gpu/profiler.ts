// GPU time per kernel from timestamp queries. While a profiler is attached to the
// runtime, every dispatch runs in a compute pass of its own whose beginning and end
// write timestamps; each submit resolves its timestamps into a buffer that `collect`
// reads back. The passes serialise the kernels and add a little time between them,
// so profile to see where a step's GPU time goes, and time it without the profiler.

import { GpuError } from '../device/errors.ts';

/** Timestamp pairs one submit can hold; the runtime submits early when they run out. */
export const PROFILE_PASSES = 2048;

export interface KernelTime {
  /** Kernel family and entry point, e.g. `matmul/tiled.main` (override constants dropped). */
  kernel: string;
  dispatches: number;
  ms: number;
}

interface Pending {
  names: string[];
  buffer: GPUBuffer;
}

/** Kernel label without its override constants: `matmul/skinny.skinny<SKINNY_ROWS=1,...>` -> `matmul/skinny.skinny`. */
export function kernelFamily(label: string): string {
  const at = label.indexOf('<');
  return at < 0 ? label : label.slice(0, at);
}

/**
 * Sums GPU time per kernel from begin/end timestamp pairs (nanoseconds, as a resolved
 * query set holds them): pair i belongs to names[i]. A pair whose end precedes its
 * beginning (a counter reset) counts as zero time.
 */
export function addKernelTimes(into: Map<string, KernelTime>, names: readonly string[], stamps: BigUint64Array): void {
  names.forEach((name, i) => {
    const kernel = kernelFamily(name);
    const begin = stamps[2 * i];
    const end = stamps[2 * i + 1];
    const row = into.get(kernel) ?? { kernel, dispatches: 0, ms: 0 };
    row.dispatches++;
    if (end > begin) row.ms += Number(end - begin) / 1e6;
    into.set(kernel, row);
  });
}

function slowestFirst(times: Map<string, KernelTime>): KernelTime[] {
  return [...times.values()].sort((a, b) => b.ms - a.ms);
}

export class KernelProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private names: string[] = [];
  private pending: Pending[] = [];
  private readonly times = new Map<string, KernelTime>();
  private readonly sections = new Map<string, Map<string, KernelTime>>();

  constructor(private readonly device: GPUDevice, hasTimestamps: boolean) {
    if (!hasTimestamps) throw new GpuError('kernel profiling needs the timestamp-query feature, which this adapter does not offer');
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * PROFILE_PASSES, label: 'kernel profile' });
    this.resolveBuffer = device.createBuffer({ size: 16 * PROFILE_PASSES, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC, label: 'kernel profile resolve' });
  }

  get full(): boolean {
    return this.names.length >= PROFILE_PASSES;
  }

  /** The pass descriptor of the next dispatch, kernel `name`. */
  passFor(name: string): GPUComputePassDescriptor {
    const i = this.names.length;
    if (i >= PROFILE_PASSES) throw new GpuError('kernel profiler: too many dispatches in one submit (the runtime should have submitted)');
    this.names.push(name);
    return { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } };
  }

  /** Records the resolve of this submit's timestamps into `encoder`, before it is finished. */
  resolve(encoder: GPUCommandEncoder): void {
    const n = this.names.length;
    if (n === 0) return;
    const buffer = this.device.createBuffer({ size: 16 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: 'kernel profile readback' });
    encoder.resolveQuerySet(this.querySet, 0, 2 * n, this.resolveBuffer, 0);
    encoder.copyBufferToBuffer(this.resolveBuffer, 0, buffer, 0, 16 * n);
    this.pending.push({ names: this.names, buffer });
    this.names = [];
  }

  /**
   * Reads back every submitted batch's timestamps and returns the totals so far, slowest
   * first; with a `section`, those batches' times are also summed under it (sectionTimes).
   */
  async collect(section?: string): Promise<KernelTime[]> {
    const pending = this.pending;
    this.pending = [];
    const into = section === undefined || !pending.length ? null : this.sections.get(section) ?? new Map<string, KernelTime>();
    if (into) this.sections.set(section!, into);
    for (const p of pending) {
      await p.buffer.mapAsync(GPUMapMode.READ);
      const stamps = new BigUint64Array(p.buffer.getMappedRange().slice(0));
      addKernelTimes(this.times, p.names, stamps);
      if (into) addKernelTimes(into, p.names, stamps);
      p.buffer.unmap();
      p.buffer.destroy();
    }
    return slowestFirst(this.times);
  }

  /** The times collected under each section so far, slowest kernel first, sections in the order first seen. */
  sectionTimes(): Map<string, KernelTime[]> {
    return new Map([...this.sections].map(([name, times]) => [name, slowestFirst(times)]));
  }

  destroy(): void {
    for (const p of this.pending) p.buffer.destroy();
    this.pending = [];
    this.querySet.destroy();
    this.resolveBuffer.destroy();
  }
}
