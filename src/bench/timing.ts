// Wall-clock timing of GPU work: warm-up runs, then the median of timed runs, each
// ending in a full sync so the time covers the GPU work, not just its recording; of
// repeated calls with the first recorded before the clock starts; and of the
// recording alone.

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
  const times: number[] = [];
  for (let i = 0; i < iters + 1; i++) {
    const t0 = performance.now();
    holdingSubmits(rt, record);
    if (i > 0) times.push(performance.now() - t0);
    await rt.sync();
  }
  return median(times);
}

/**
 * Wall time of `reps` calls of `once` and a sync, the clock starting once the first
 * call is recorded (its work held back, so none of it runs before the clock starts).
 * The first call recorded after a wait for the GPU can stall the host while the GPU
 * has nothing to run: glibc merging, inside that call's beginComputePass, the small
 * blocks dawn.node's completion polling left in its fast bins (gpu/paced_wait.ts). On
 * the H200 that was 4-13 ms in about every other 100 ms sample (8192^3 read 44-46
 * TFLOP/s in those samples against 48.7) before the runtime paced its waits, and 1
 * sample in 40 at 2048^3 after. Recording one call before the clock keeps such a stall
 * out of the timed span; the bias this leaves is one call's normal recording, 0.1-0.3
 * ms against a 100 ms sample.
 */
export async function timePrimed(rt: Runtime, once: () => void, reps: number): Promise<number> {
  holdingSubmits(rt, once);
  const t0 = performance.now();
  for (let r = 1; r < reps; r++) once();
  await rt.sync();
  return performance.now() - t0;
}

/** Runs `record` with the runtime's automatic submits held back (an explicit flush still submits). */
export function holdingSubmits(rt: Runtime, record: () => void): void {
  const { autoFlush, firstFlush } = rt;
  rt.autoFlush = Number.MAX_SAFE_INTEGER;
  rt.firstFlush = Number.MAX_SAFE_INTEGER;
  try {
    record();
  } finally {
    rt.autoFlush = autoFlush;
    rt.firstFlush = firstFlush;
  }
}

export function median(times: number[]): number {
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
