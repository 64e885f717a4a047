// The teacher pass of the self-distillation methods, its prompts scored whole against
// their shared prefixes run once (trainer/update.ts sharedPrefixMicroBatches), on the
// bundled model's household turns: the teacher prompts of a rollout (its own policy,
// skills block before the template), then each way at a few micro-batch budgets, its
// wall time over repetitions, the pool's peak in use, and (where the adapter has
// timestamp queries) GPU milliseconds per kernel, and how far its log-probs are from
// the first way's. Where the device has f16 subgroup
// matrices, the training budget (32768) runs again with the tensor-core attention
// forward (kernels/attention_tensor.ts).
//
//   bun dev/teacher_pass.ts [--tasks 16] [--runs 8] [--turns 20] [--reps 3] [--toggles a,b]

import { parseArgs } from 'node:util';
import { householdRollout } from './household_rollout.ts';
import { kernelTimes } from '../src/bench/profile.ts';
import { initRuntime } from '../src/gpu/runtime.ts';
import { tensorAttentionMissing } from '../src/kernels/attention_tensor.ts';
import { teacherSequences } from '../src/trainer/teacher.ts';
import { responseLogprobs, sharedPrefixMicroBatches, splitMicroBatches, type MicroBatch } from '../src/trainer/update.ts';

const { values: args } = parseArgs({
  options: {
    tasks: { type: 'string', default: '16' },
    runs: { type: 'string', default: '8' },
    turns: { type: 'string', default: '20' },
    reps: { type: 'string', default: '3' },
    toggles: { type: 'string', default: '' },
  },
});

const rt = await initRuntime({ toggles: args.toggles.split(',').filter(Boolean) });
const { model, samples } = await householdRollout({ tasks: Number(args.tasks), runs: Number(args.runs), turns: Number(args.turns) });
const sequences = teacherSequences(samples, false);
const all = sequences.map((_, i) => i);
console.log(JSON.stringify({ samples: samples.length, promptTokens: sequences.reduce((n, q) => n + q.ids.length, 0) }));

const ways: [string, () => { batches: MicroBatch[]; sharedTokens: number }, boolean][] = [];
const tensorAttention = tensorAttentionMissing(rt, model.config.headDim) === null;
for (const budget of [8192, 32768, 131072]) {
  for (const tensor of budget === 32768 && tensorAttention ? [false, true] : [false]) {
    const suffix = tensor ? ' tensor-core attention' : '';
    ways.push([`whole ${budget}${suffix}`, () => ({ batches: splitMicroBatches(sequences, all, budget), sharedTokens: 0 }), tensor]);
    ways.push([`shared ${budget}${suffix}`, () => sharedPrefixMicroBatches(sequences, budget), tensor]);
  }
}
let baseline: Float32Array[] | undefined;
for (const [name, plan, tensor] of ways) {
  rt.policy.attention.tensorForward = tensor;
  const t0 = performance.now();
  const { batches, sharedTokens } = plan();
  const planMs = performance.now() - t0;
  // The first pass compiles what the shapes need; its log-probs are held to the first way's.
  const logprobs = await responseLogprobs(model, samples, batches);
  baseline ??= logprobs;
  const maxAbsDiff = Math.max(0, ...logprobs.map((row, i) => row.reduce((m, x, t) => Math.max(m, Math.abs(x - baseline![i][t])), 0)));
  rt.pool.resetPeaks();
  const walls: number[] = [];
  for (let r = 0; r < Number(args.reps); r++) {
    const t = performance.now();
    await responseLogprobs(model, samples, batches);
    walls.push(Math.round(performance.now() - t));
  }
  const times = rt.caps.timestampQuery ? await kernelTimes(rt, () => responseLogprobs(model, samples, batches)) : [];
  console.log(JSON.stringify({
    way: name, microBatches: batches.length, sharedTokens, planMs: Math.round(planMs), wallMs: walls, maxAbsDiff: +maxAbsDiff.toExponential(2),
    peakInUseMiB: Math.round(rt.pool.stats.peakInUse / 2 ** 20), gpuMs: Math.round(times.reduce((s, k) => s + k.ms, 0)),
    kernels: [...times].sort((a, b) => b.ms - a.ms).slice(0, 8).map((k) => `${k.kernel} x${k.dispatches} ${k.ms.toFixed(1)} ms`),
  }));
}
