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
 * On the H200 the first call recorded after a wait for the GPU stalled the host for
 * 4-13 ms in about every other 100 ms sample, while the GPU had nothing to run: the
 * matmul bench read 8192^3 at 44-46 TFLOP/s in those samples against 48.7. The time
 * goes to the first GPUCommandEncoder.beginComputePass (2.5-8.1 ms in 11 of 20
 * samples; every other WebGPU call of that product under 0.1 ms). Recording a
 * throwaway command encoder, an error scope, a buffer or JS objects first did not take
 * the stall; recording one product did, and every sample then read 48.7-48.8. The
 * bias this leaves is one call's normal recording, 0.1-0.3 ms against a 100 ms sample.
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
