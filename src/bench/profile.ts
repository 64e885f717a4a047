// Where a step's GPU time goes: the training step and decoding of the bench model,
// each run once with the kernel profiler attached (timestamp queries, one pass per
// dispatch), as rows of GPU milliseconds per kernel. Beside them, the same work's
// wall time without the profiler: wall time far above the GPU total means the step
// is bound by the host (recording, submits, readbacks), not by the kernels.

import type { Runtime } from '../gpu/runtime.ts';
import type { KernelTime } from '../gpu/profiler.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { benchModel, randomIds, trainStepRunner } from './train_step.ts';

/** What `read` takes from the profiler after one run of `fn`, the profiler attached for that run only. */
async function whileProfiling<T>(rt: Runtime, fn: () => Promise<unknown>, read: () => Promise<T>): Promise<T> {
  rt.startProfiling();
  try {
    await fn();
    return await read();
  } finally {
    await rt.stopProfiling();
  }
}

/** GPU time per kernel of one run of `fn`. */
export function kernelTimes(rt: Runtime, fn: () => Promise<unknown>): Promise<KernelTime[]> {
  return whileProfiling(rt, fn, () => rt.profile());
}

/** GPU time per kernel of each section `fn` closes (a training iteration's phases). */
export function sectionTimes(rt: Runtime, fn: () => Promise<unknown>): Promise<Map<string, KernelTime[]>> {
  return whileProfiling(rt, fn, () => rt.profileSections());
}

/** A total row (`extra` merged in) and one row per kernel with its share of the GPU time. */
export function profileRows(what: string, times: readonly KernelTime[], extra: object = {}): object[] {
  const gpuMs = times.reduce((s, r) => s + r.ms, 0);
  return [
    { kind: 'profile_total', what, ...extra, gpu_ms: +gpuMs.toFixed(2), dispatches: times.reduce((s, r) => s + r.dispatches, 0) },
    ...times.map((r) => ({ kind: 'profile', what, kernel: r.kernel, dispatches: r.dispatches, ms: +r.ms.toFixed(3), share: +(r.ms / Math.max(gpuMs, 1e-9)).toFixed(3) })),
  ];
}

async function profiled(rt: Runtime, what: string, fn: () => Promise<void>): Promise<object[]> {
  await fn();
  const t0 = performance.now();
  await fn();
  await rt.sync();
  const wallMs = performance.now() - t0;
  return profileRows(what, await kernelTimes(rt, fn), { wall_ms: +wallMs.toFixed(2) });
}

export async function benchProfile(
  rt: Runtime, preset: string, opts: { batch?: number; seq?: number; batches?: number[]; promptTokens?: number; newTokens?: number } = {},
): Promise<object[]> {
  if (!rt.caps.timestampQuery) return [{ kind: 'profile', skipped: 'this adapter has no timestamp-query feature' }];
  const out: object[] = [];
  const B = opts.batch ?? 8;
  const T = opts.seq ?? 512;
  const train = trainStepRunner(rt, preset, B, T);
  try {
    out.push(...(await profiled(rt, `train step ${preset} ${B}x${T}`, train.step)));
  } finally {
    train.dispose();
  }
  const model = benchModel(preset);
  const batches = opts.batches ?? [1, 32];
  const engine = new LocalEngine(model, { maxBatch: Math.max(64, ...batches) });
  const promptTokens = opts.promptTokens ?? 128;
  const newTokens = opts.newTokens ?? 32;
  for (const B of batches) {
    const requests = (tokens: number) => Array.from({ length: B }, (_, b) => ({
      promptIds: Array.from(randomIds(promptTokens, model.config.vocabSize, 1000 + b)),
      params: { maxTokens: tokens, temperature: 1, topP: 1, topK: 0, ignoreEos: true, seed: b },
    }));
    const rows = await profiled(rt, `generate ${preset} batch ${B}, ${promptTokens} + ${newTokens} tokens`, async () => void (await engine.generate(requests(newTokens))));
    // The prefill alone (one new token), so the total's wall time splits into prefill and decode steps.
    const prefill = requests(1);
    await engine.generate(prefill);
    const t0 = performance.now();
    await engine.generate(prefill);
    const prefillMs = performance.now() - t0;
    const total = rows[0] as { wall_ms: number };
    Object.assign(total, { prefill_wall_ms: +prefillMs.toFixed(2), decode_step_wall_ms: +((total.wall_ms - prefillMs) / Math.max(newTokens - 1, 1)).toFixed(3) });
    out.push(...rows);
  }
  await engine.close();
  for (const p of model.parameters()) p.dispose();
  rt.pool.trim();
  return out;
}
