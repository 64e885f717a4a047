// GPU memory per phase of a training iteration (rollout, scoring passes, the update,
// validation): the most the buffer pool's buffers held during each, destroyed ones the
// GPU had not yet given back included (gpu/buffer_pool.ts, peakHeld), in metrics.jsonl
// as memory/<phase>_peak_gib and memory/peak_gib. Ending a phase also gives the pool's
// free buffers back to the driver and waits until it has them, so one phase's leftover
// sizes never stack onto the next phase's.

import type { Runtime } from './runtime.ts';

const GIB = 2 ** 30;

export class PhaseMemory {
  private readonly peaks = new Map<string, number>();

  constructor(private readonly rt: Runtime) {
    rt.pool.resetPeaks();
  }

  /**
   * Closes `phase`: records its peak, trims the pool and waits for the GPU, so the
   * trimmed memory is back before the next phase allocates; starts the next count.
   */
  async end(phase: string): Promise<void> {
    this.peaks.set(phase, Math.max(this.peaks.get(phase) ?? 0, this.rt.pool.stats.peakHeld));
    this.rt.releaseCached();
    await this.rt.sync();
    this.rt.pool.resetPeaks();
  }

  /** Records `phase`'s peak and starts the next count, keeping the pool's free buffers (for a loop that repeats one phase, as SFT's steps). */
  record(phase: string): void {
    this.peaks.set(phase, Math.max(this.peaks.get(phase) ?? 0, this.rt.pool.stats.peakHeld));
    this.rt.pool.resetPeaks();
  }

  /** memory/<phase>_peak_gib for every phase ended so far, and memory/peak_gib over them all. */
  metrics(): Record<string, number> {
    const out: Record<string, number> = {};
    let all = 0;
    for (const [phase, bytes] of this.peaks) {
      out[`memory/${phase}_peak_gib`] = bytes / GIB;
      all = Math.max(all, bytes);
    }
    if (this.peaks.size) out['memory/peak_gib'] = all / GIB;
    return out;
  }
}
