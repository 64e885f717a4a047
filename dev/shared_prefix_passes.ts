// The passes over an iteration's sequences with their shared prefixes run once
// (trainer/update.ts sharedPrefixMicroBatches) against whole sequences, on the bundled
// model's household turns: the teacher's prompts (skills block before the template)
// and the policy's (the old log-probs', the reference's and the update's), each way at a
// few micro-batch budgets: wall time over repetitions, the pool's peak in use, GPU
// milliseconds per kernel where the adapter has timestamp queries, and how far its
// log-probs are from the first way's. `--grad` also runs each micro-batch's backward,
// as the update does (the policy's sequences only; the model then trains). Where the
// device has f16 subgroup matrices, the training budget (32768) of a pass without
// gradients runs again with the tensor-core attention forward.
//
//   bun dev/shared_prefix_passes.ts [--sequences teacher|policy] [--grad] [--budgets 8192,32768,131072]
//     [--tasks 16] [--runs 8] [--turns 20] [--reps 3] [--toggles a,b]

import { parseArgs } from 'node:util';
import { householdRollout } from './household_rollout.ts';
import { kernelTimes } from '../src/bench/profile.ts';
import { initRuntime } from '../src/gpu/runtime.ts';
import { tensorAttentionMissing } from '../src/kernels/attention_tensor.ts';
import { turnSequences } from '../src/rollout/turn_sequences.ts';
import { packedLogprobs } from '../src/scoring/score.ts';
import { backward, zeroGrad } from '../src/tensor/autograd.ts';
import { sum } from '../src/tensor/ops/index.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { teacherSequences } from '../src/trainer/teacher.ts';
import { responseLogprobs, sharedPrefixMicroBatches, splitMicroBatches, type MicroBatch } from '../src/trainer/update.ts';

const { values: args } = parseArgs({
  options: {
    sequences: { type: 'string', default: 'teacher' },
    grad: { type: 'boolean', default: false },
    budgets: { type: 'string', default: '8192,32768,131072' },
    tasks: { type: 'string', default: '16' },
    runs: { type: 'string', default: '8' },
    turns: { type: 'string', default: '20' },
    reps: { type: 'string', default: '3' },
    toggles: { type: 'string', default: '' },
  },
});
if (args.sequences !== 'teacher' && args.sequences !== 'policy') throw new Error(`--sequences ${args.sequences}: teacher or policy`);
if (args.grad && args.sequences !== 'policy') throw new Error('--grad: the update trains on the policy\'s sequences (--sequences policy)');

const rt = await initRuntime({ toggles: args.toggles.split(',').filter(Boolean) });
const { model, samples } = await householdRollout({ tasks: Number(args.tasks), runs: Number(args.runs), turns: Number(args.turns), trainable: args.grad });
const sequences = args.sequences === 'teacher' ? teacherSequences(samples, false) : turnSequences(samples, { merge: true });
const all = sequences.map((_, i) => i);
console.log(JSON.stringify({ sequences: args.sequences, samples: samples.length, tokens: sequences.reduce((n, q) => n + q.ids.length, 0), grad: args.grad }));

/** One pass over the micro-batches: log-probs read back, or (--grad) each micro-batch's backward as the update runs it. */
async function pass(batches: readonly MicroBatch[]): Promise<Float32Array[]> {
  if (!args.grad) return responseLogprobs(model, samples, batches);
  const params = model.parameters();
  for (const mb of batches) {
    await scopeAsync(async () => {
      backward(sum(packedLogprobs(model, mb.packed, { positions: mb.positions, withEntropy: true, prefixes: mb.prefixes }).logprobs));
    });
    await rt.settle();
  }
  zeroGrad(params);
  return responseLogprobs(model, samples, batches, 1, { asTraining: true });
}

const ways: [string, () => { batches: MicroBatch[]; sharedTokens: number }, boolean][] = [];
const tensorAttention = !args.grad && tensorAttentionMissing(rt, model.config.headDim) === null;
for (const budget of args.budgets.split(',').map(Number)) {
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
  const logprobs = await pass(batches);
  baseline ??= logprobs;
  const maxAbsDiff = Math.max(0, ...logprobs.map((row, i) => row.reduce((m, x, t) => Math.max(m, Math.abs(x - baseline![i][t])), 0)));
  rt.pool.resetPeaks();
  const walls: number[] = [];
  for (let r = 0; r < Number(args.reps); r++) {
    const t = performance.now();
    await pass(batches);
    walls.push(Math.round(performance.now() - t));
  }
  const times = rt.caps.timestampQuery ? await kernelTimes(rt, () => pass(batches)) : [];
  console.log(JSON.stringify({
    way: name, microBatches: batches.length, prefixed: batches.filter((mb) => mb.prefixes).length, sharedTokens, planMs: Math.round(planMs), wallMs: walls,
    maxAbsDiff: +maxAbsDiff.toExponential(2), peakInUseMiB: Math.round(rt.pool.stats.peakInUse / 2 ** 20), gpuMs: Math.round(times.reduce((s, k) => s + k.ms, 0)),
    kernels: [...times].sort((a, b) => b.ms - a.ms).slice(0, 8).map((k) => `${k.kernel} x${k.dispatches} ${k.ms.toFixed(1)} ms`),
  }));
}
process.exit(0);
