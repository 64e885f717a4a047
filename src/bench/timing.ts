// Wall-clock timing of GPU work: warm-up runs, then the median of timed runs, each
// ending in a full sync so the time covers the GPU work, not just its recording.

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
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
