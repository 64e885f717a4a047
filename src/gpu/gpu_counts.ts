// What a piece of GPU work cost the host in the runtime's own counts: dispatches,
// submits, readbacks (each a wait for the GPU), bind groups created and copies
// (uploads recorded between dispatches included, each ending the compute pass). These are
// what a decode step pays on a real GPU beyond its arithmetic (on the H200 about
// 6-10 us a dispatch, 33-57 us a submit-and-wait round trip), and the software GPU
// counts them exactly, so a change to the decoding loop is measured here first.

import type { Runtime } from './runtime.ts';

export interface GpuCounts {
  dispatches: number;
  submits: number;
  readbacks: number;
  bindGroups: number;
  copies: number;
}

export function gpuCounts(rt: Runtime): GpuCounts {
  return { dispatches: rt.dispatchCount, submits: rt.submitCount, readbacks: rt.readCount, bindGroups: rt.bindGroupCount, copies: rt.copyCount };
}

const KEYS: Record<keyof GpuCounts, string> = { dispatches: 'dispatches', submits: 'submits', readbacks: 'readbacks', bindGroups: 'bind_groups', copies: 'copies' };

/** The counts since `before` (keys `<count>`) and each divided by `n` units, rounded to 3 decimals (`<count>_per_<unit>`). */
export function countsPer(rt: Runtime, before: GpuCounts, n: number, unit: string): Record<string, number> {
  const now = gpuCounts(rt);
  const out: Record<string, number> = {};
  for (const k of Object.keys(KEYS) as (keyof GpuCounts)[]) {
    out[KEYS[k]] = now[k] - before[k];
    out[`${KEYS[k]}_per_${unit}`] = +((now[k] - before[k]) / Math.max(n, 1)).toFixed(3);
  }
  return out;
}

/**
 * What a phase of a training iteration cost the host since `before`, as metrics
 * `gpu/<phase>_dispatches`, `gpu/<phase>_submits` and `gpu/<phase>_readbacks` (each
 * readback a wait for the GPU).
 */
export function phaseCountMetrics(rt: Runtime, before: GpuCounts, phase: string): Record<string, number> {
  const now = gpuCounts(rt);
  return {
    [`gpu/${phase}_dispatches`]: now.dispatches - before.dispatches,
    [`gpu/${phase}_submits`]: now.submits - before.submits,
    [`gpu/${phase}_readbacks`]: now.readbacks - before.readbacks,
  };
}
