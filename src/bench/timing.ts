// Wall-clock timing of GPU work: warm-up runs, then the median of timed runs, each
// ending in a full sync so the time covers the GPU work, not just its recording; and
// of the recording alone.

import type { Runtime } from '../gpu/runtime.ts';

export async function timeGpu(rt: Runtime, fn: () => void | Promise<void>, opts: { warmup?: number; iters?: number } = {}): Promise<number> {
  const { warmup = 2, iters = 5 } = opts;
  for (let i = 0; i < warmup; i++) {
    await fn();
    await rt.sync();
  }
  const times: number[] = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await fn();
    await rt.sync();
    times.push(performance.now() - t0);
  }
  return median(times);
}

/**
 * Median wall time of `record` alone: submits are held back until it returns, and the
 * sync after each run is not timed (the host's share of recorded work).
 */
export async function timeRecording(rt: Runtime, record: () => void, iters = 7): Promise<number> {
  const { autoFlush, firstFlush } = rt;
  rt.autoFlush = Number.MAX_SAFE_INTEGER;
  rt.firstFlush = Number.MAX_SAFE_INTEGER;
  const times: number[] = [];
  try {
    for (let i = 0; i < iters + 1; i++) {
      const t0 = performance.now();
      record();
      if (i > 0) times.push(performance.now() - t0);
      await rt.sync();
    }
  } finally {
    rt.autoFlush = autoFlush;
    rt.firstFlush = firstFlush;
  }
  return median(times);
}

export function median(times: number[]): number {
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
