import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as ref from '../src/reference/delta_rule.ts';
import { randn, uniform } from '../src/util/random.ts';
import { backward, noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { deltaDecay, gatedDeltaRule, type GatedDeltaRuleOptions } from '../src/tensor/ops/delta_rule.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros, type Tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

// q and k near unit length (the model L2-normalises them), decays in (-1, -0.05).
function inputs(d: ref.DeltaRuleDims, seed: number): ref.DeltaRuleInputs {
  const nqk = d.b * d.t * d.hk * d.dk;
  return {
    q: randn(nqk, seed, 1 / Math.sqrt(d.dk)),
    k: randn(nqk, seed + 1, 1 / Math.sqrt(d.dk)),
    v: randn(d.b * d.t * d.hv * d.dv, seed + 2),
    g: uniform(d.b * d.t * d.hv, seed + 3, -1, -0.05),
    beta: uniform(d.b * d.t * d.hv, seed + 4, 0.05, 0.95),
  };
}

function upload(d: ref.DeltaRuleDims, x: ref.DeltaRuleInputs, grad = false): Tensor[] {
  const t = (a: Float32Array, shape: number[]) => (grad ? requireGrad(tensor(a, shape)) : tensor(a, shape));
  return [
    t(x.q, [d.b, d.t, d.hk, d.dk]), t(x.k, [d.b, d.t, d.hk, d.dk]), t(x.v, [d.b, d.t, d.hv, d.dv]),
    t(x.g, [d.b, d.t, d.hv]), t(x.beta, [d.b, d.t, d.hv]),
  ];
}

/** Rows [from, to) of time of a [B, T, ...] array. */
function timeSlice(a: Float32Array, b: number, t: number, from: number, to: number): Float32Array {
  const row = a.length / (b * t);
  const out = new Float32Array(b * (to - from) * row);
  for (let i = 0; i < b; i++) out.set(a.subarray((i * t + from) * row, (i * t + to) * row), i * (to - from) * row);
  return out;
}

const cases: [string, ref.DeltaRuleDims, number, number[] | null][] = [
  ['one chunk, T < chunk', { b: 2, t: 5, hk: 1, hv: 2, dk: 8, dv: 8 }, 64, null],
  ['T not a multiple of the chunk, GQA, Dk != Dv', { b: 2, t: 13, hk: 2, hv: 4, dk: 8, dv: 12 }, 4, null],
  ['left padding across chunk borders', { b: 3, t: 11, hk: 1, hv: 3, dk: 16, dv: 5 }, 4, [0, 3, 6]],
  ['chunk of 1', { b: 1, t: 6, hk: 1, hv: 1, dk: 4, dv: 3 }, 1, [2]],
  ['value columns in two scan blocks', { b: 1, t: 9, hk: 1, hv: 1, dk: 20, dv: 70 }, 8, [1]],
];

describe('gatedDeltaRule', () => {
  test('chunked forward matches the recurrence', async () => {
    await gpu();
    for (const [label, d, chunk, pads] of cases) {
      const x = inputs(d, 1);
      const padLeft = pads ? Int32Array.from(pads) : undefined;
      await scopeAsync(async () => {
        const [q, k, v, g, beta] = upload(d, x);
        const o = gatedDeltaRule(q, k, v, g, beta, { chunk, padLeft: padLeft && tensor(padLeft, [d.b], 'i32') });
        assert.deepEqual([...o.shape], [d.b, d.t, d.hv, d.dv]);
        assertClose(await read(o), ref.deltaRuleForward(x, d, { padLeft }).out, { atol: 2e-5, rtol: 1e-4, label });
      });
    }
  });

  test('recurrent form matches the recurrence', async () => {
    await gpu();
    for (const [label, d, , pads] of cases) {
      const x = inputs(d, 2);
      const padLeft = pads ? Int32Array.from(pads) : undefined;
      await scopeAsync(async () => {
        const [q, k, v, g, beta] = upload(d, x);
        const o = gatedDeltaRule(q, k, v, g, beta, { mode: 'recurrent', padLeft: padLeft && tensor(padLeft, [d.b], 'i32') });
        assertClose(await read(o), ref.deltaRuleForward(x, d, { padLeft }).out, { atol: 2e-5, rtol: 1e-4, label });
      });
    }
  });

  test('a chunked prefill into a state, then stateful steps, equal one full pass', async () => {
    await gpu();
    const d = { b: 2, t: 12, hk: 1, hv: 2, dk: 8, dv: 6 };
    const x = inputs(d, 3);
    const padLeft = Int32Array.from([0, 4]);
    const full = ref.deltaRuleForward(x, d, { padLeft });
    await scopeAsync(async () => {
      const state = zeros([d.b, d.hv, d.dk, d.dv]);
      const pad = tensor(padLeft, [d.b], 'i32');
      // A 7-token chunked prefill, a 3-token chunked step, then single tokens by recurrence.
      const steps: [number, GatedDeltaRuleOptions['mode']][] = [[7, 'chunked'], [3, 'chunked'], [1, 'auto'], [1, 'recurrent']];
      let at = 0;
      for (const [n, mode] of steps) {
        const part = (a: Float32Array) => timeSlice(a, d.b, d.t, at, at + n);
        const dn = { ...d, t: n };
        const [q, k, v, g, beta] = upload(dn, { q: part(x.q), k: part(x.k), v: part(x.v), g: part(x.g), beta: part(x.beta) });
        const o = noGrad(() => gatedDeltaRule(q, k, v, g, beta, { state, padLeft: pad, offset: at, mode, chunk: 4 }));
        assertClose(await read(o), part(full.out), { atol: 2e-5, rtol: 1e-4, label: `tokens ${at}..${at + n} (${mode})` });
        at += n;
      }
      assertClose(await read(state), full.state, { atol: 2e-5, rtol: 1e-4, label: 'final state' });
    });
  });

  test('chunked backward matches back-propagation through the recurrence', async () => {
    await gpu();
    for (const [label, d, chunk, pads] of cases) {
      const x = inputs(d, 4);
      const dOut = randn(d.b * d.t * d.hv * d.dv, 5);
      const padLeft = pads ? Int32Array.from(pads) : undefined;
      const want = ref.deltaRuleBackward(x, d, dOut, { padLeft });
      await scopeAsync(async () => {
        const ts = upload(d, x, true);
        const [q, k, v, g, beta] = ts;
        backward(gatedDeltaRule(q, k, v, g, beta, { chunk, padLeft: padLeft && tensor(padLeft, [d.b], 'i32') }), tensor(dOut, [d.b, d.t, d.hv, d.dv]));
        const names = ['q', 'k', 'v', 'g', 'beta'] as const;
        for (let i = 0; i < 5; i++) {
          assertClose(await read(ts[i].grad!), want[names[i]], { atol: 1e-4, rtol: 1e-3, label: `${label}: d${names[i]}` });
        }
        for (const t of ts) t.dispose();
      });
    }
  });

  test('backward passes finite differences', async () => {
    await gpu();
    const d = { b: 1, t: 7, hk: 1, hv: 2, dk: 4, dv: 3 };
    const x = inputs(d, 6);
    const pad = Int32Array.from([2]);
    await gradCheck((q, k, v, g, beta) => gatedDeltaRule(q, k, v, g, beta, { chunk: 3, padLeft: tensor(pad, [1], 'i32') }), [
      { data: x.q, shape: [1, 7, 1, 4] },
      { data: x.k, shape: [1, 7, 1, 4] },
      { data: x.v, shape: [1, 7, 2, 3] },
      { data: x.g, shape: [1, 7, 2] },
      { data: x.beta, shape: [1, 7, 2] },
    ], { label: 'gatedDeltaRule', probe: 8 });
  });

  test('the fused decay gate matches the CPU reference, forward and backward', async () => {
    await gpu();
    // Rows of [5, 7, 3] span softplus's regimes: very negative, moderate, past the threshold.
    const a = Float32Array.from(randn(5 * 7 * 3, 9, 4), (x, i) => (i % 11 === 0 ? x - 30 : i % 13 === 0 ? x + 30 : x));
    const aLog = randn(3, 10);
    const dt = randn(3, 11);
    const dg = randn(a.length, 12);
    await scopeAsync(async () => {
      const [at, lt, dtt] = [requireGrad(tensor(a, [5, 7, 3])), requireGrad(tensor(aLog, [3])), requireGrad(tensor(dt, [3]))];
      const g = deltaDecay(at, lt, dtt);
      assertClose(await read(g), ref.deltaDecayForward(a, aLog, dt), { atol: 1e-6, rtol: 1e-5, label: 'g' });
      backward(g, tensor(dg, [5, 7, 3]));
      const want = ref.deltaDecayBackward(a, aLog, dt, dg);
      assertClose(await read(at.grad!), want.a, { atol: 1e-5, rtol: 1e-4, label: 'da' });
      assertClose(await read(lt.grad!), want.aLog, { atol: 1e-4, rtol: 1e-4, label: 'daLog' });
      assertClose(await read(dtt.grad!), want.dtBias, { atol: 1e-4, rtol: 1e-4, label: 'ddtBias' });
      for (const t of [at, lt, dtt]) t.dispose();
    });
    await gradCheck((x, l, d) => deltaDecay(x, l, d), [
      { data: randn(4 * 2, 13), shape: [4, 2] },
      { data: randn(2, 14, 0.5), shape: [2] },
      { data: randn(2, 15), shape: [2] },
    ], { label: 'deltaDecay' });
  });

  test('bad shapes and stateful training are refused', async () => {
    await gpu();
    await scopeAsync(async () => {
      const d = { b: 1, t: 3, hk: 2, hv: 3, dk: 4, dv: 4 };
      const [q, k, v, g, beta] = upload(d, inputs(d, 7));
      assert.throws(() => gatedDeltaRule(q, k, v, g, beta), /gatedDeltaRule: 3 value heads are not a multiple of 2 key heads: q \[1, 3, 2, 4\]/);
      const d2 = { b: 1, t: 3, hk: 1, hv: 2, dk: 4, dv: 4 };
      const [q2, k2, v2, g2, beta2] = upload(d2, inputs(d2, 8), true);
      assert.throws(() => gatedDeltaRule(q2, k2, v2, g2, beta2, { state: zeros([1, 2, 4, 4]) }), /run it under noGrad/);
      assert.throws(() => gatedDeltaRule(q2, k2, v2, g2, beta2, { mode: 'recurrent' }), /no backward/);
      assert.throws(() => noGrad(() => gatedDeltaRule(q2, k2, v2, g2, beta2, { state: zeros([1, 2, 4, 3]) })), /state \[1, 2, 4, 3\] must be \[1, 2, 4, 4\]/);
      assert.throws(() => gatedDeltaRule(q2, k2, v2, g2, beta2, { chunk: 65 }), /chunk 65 must be an integer in \[1, 64\]/);
      assert.throws(() => deltaDecay(g2, tensor(new Float32Array(3), [3]), tensor(new Float32Array(2), [2])), /deltaDecay: aLog \[3\] and dtBias \[2\] must be \[H\] for a \[1, 3, 2\]/);
      for (const t of [q2, k2, v2, g2, beta2]) t.dispose();
    });
  });
});
