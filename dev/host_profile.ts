// The host's share of a decode step: records decode steps of the bundled model
// (models/household-tiny) as LocalEngine's chunks do (hiddenCached on the fused layers
// with f16 weight copies, the LM head, sampleStep), with submits held back so the
// clock covers the recording alone, and reports host microseconds per step and per
// dispatch. With --split it also times the calls into Runtime.dispatch, which separates
// the launcher code above it from the runtime and Dawn below.
//
//   EGL_PLATFORM=surfaceless bun dev/host_profile.ts [--batch 1] [--steps 32] [--reps 30] [--split]
//
// A shared host's other load shows in single repetitions (on the 2-core dev machine
// they ranged over 2-3x), so the minimum is reported beside the median.
//
// The fused layers are forced ('always'), since the software GPU would otherwise take
// the op-by-op path a real GPU never takes for these shapes. For a CPU profile of the
// same work: bun --cpu-prof-md --cpu-prof-dir=/tmp/prof dev/host_profile.ts --reps 40

import { parseArgs } from 'node:util';
import { holdingSubmits, median } from '../src/bench/timing.ts';
import { initRuntime, type Runtime } from '../src/gpu/runtime.ts';
import { lastLogits } from '../src/scoring/generate.ts';
import { HalfWeights } from '../src/models/half_weights.ts';
import { loadModel } from '../src/models/load.ts';
import { headOnSkinny } from '../src/models/qwen_decode.ts';
import { noGrad } from '../src/tensor/autograd.ts';
import { decodeRows, disposeDecodeRows, sampleStep } from '../src/tensor/ops/sampling.ts';
import { keep, scope } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';

const { values: args } = parseArgs({
  options: {
    batch: { type: 'string', default: '1' },
    steps: { type: 'string', default: '32' },
    reps: { type: 'string', default: '30' },
    split: { type: 'boolean', default: false },
  },
});
const B = Number(args.batch);
const steps = Number(args.steps);
const reps = Number(args.reps);

const rt: Runtime = await initRuntime({ policy: { decode: { fused: 'always', weights: 'f16' } } });
const model = loadModel(new URL('../models/household-tiny', import.meta.url).pathname, { trainable: false });
const vocab = model.config.vocabSize;
const half = HalfWeights.of(model);
const head = headOnSkinny(model, B) ? half.head : undefined;

/** Repetitions run before the timed ones: kernels compile, caches fill and the JIT settles. */
const WARMUP = 3;

// A short prompt per row, then `steps` decode steps per repetition from a fresh cache.
const P = 8;
const padLeft = new Int32Array(B);
const prompt = Int32Array.from({ length: B * P }, (_, i) => (i * 7) % vocab);
const pad = keep(tensor(padLeft, [B], 'i32'));

let dispatchMs = 0;
if (args.split) {
  const dispatch = rt.dispatch.bind(rt);
  rt.dispatch = (...a) => {
    const t0 = performance.now();
    dispatch(...a);
    dispatchMs += performance.now() - t0;
  };
}

const perStep: number[] = [];
const dispatchPerStep: number[] = [];
const inDispatch: number[] = [];
for (let rep = 0; rep < WARMUP + reps; rep++) {
  const cache = model.newCache(B, P + steps, padLeft);
  const rows = Array.from({ length: B }, (_, b) => ({ temperature: 1, topP: 1, topK: 0, seed: b, produced: 0, maxTokens: steps + 1, stopIds: [], done: false }));
  const gpu = decodeRows(rows, { ids: new Int32Array(B), positions: new Int32Array(B).fill(P - 1) }, vocab, steps + 1);
  // The prefill, outside the clock.
  scope(() => noGrad(() => sampleStep(lastLogits(model, model.hiddenCached({ ids: prompt, batch: B, seq: P }, cache)), gpu, 0)));
  await rt.sync();
  const onGpu = { positions: gpu.positions, pad };
  const dispatches = rt.dispatchCount;
  dispatchMs = 0;
  const t0 = performance.now();
  holdingSubmits(rt, () => {
    for (let j = 1; j <= steps; j++) {
      scope(() =>
        noGrad(() => {
          const hidden = model.hiddenCached({ ids: gpu.ids, batch: B, seq: 1, halfWeights: half.weights, onGpu }, cache);
          sampleStep(lastLogits(model, hidden, head), gpu, j);
        }),
      );
    }
  });
  const ms = performance.now() - t0;
  await rt.sync();
  disposeDecodeRows(gpu);
  cache.dispose();
  if (rep < WARMUP) continue;
  perStep.push((ms * 1000) / steps);
  dispatchPerStep.push((rt.dispatchCount - dispatches) / steps);
  inDispatch.push((dispatchMs * 1000) / steps);
}

const d = dispatchPerStep[0];
const stats = (xs: number[]) => ({ median: median([...xs]), min: Math.min(...xs) });
const step = stats(perStep);
console.log(`batch ${B}, ${steps} decode steps x ${reps} repetitions, ${d} dispatches a step, ${rt.bindGroupCount} bind groups created`);
console.log(`host us per step: median ${step.median.toFixed(1)}, min ${step.min.toFixed(1)}`);
console.log(`host us per dispatch: median ${(step.median / d).toFixed(2)}, min ${(step.min / d).toFixed(2)}`);
if (args.split) {
  // Each repetition's split, at the repetitions of the median and the minimum.
  const at = (us: number) => {
    const i = perStep.indexOf(us);
    return `${(inDispatch[i] / d).toFixed(2)} in Runtime.dispatch + ${((perStep[i] - inDispatch[i]) / d).toFixed(2)} above it`;
  };
  console.log(`us a dispatch: median run ${at(step.median)}; min run ${at(step.min)}`);
}
half.dispose();
pad.dispose();
