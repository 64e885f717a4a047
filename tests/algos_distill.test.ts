// The self-distillation terms (SDAR/OPSD/GRPO+OPSD, Skill-SD, PCSD) on hand-made
// tokens: expected values are worked out here from docs/ALGORITHMS.md section 3, then the
// CPU reference is held to them and the GPU terms and gradients to the reference.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gatedTerm, sdarGate, sdarTerm, skillSdTerm, type DistillInputs } from '../src/algos/distill_loss.ts';
import { pcsdGate, pcsdTerm } from '../src/algos/methods/pcsd.ts';
import { pcsdTermRef, sdarTermRef, skillSdTermRef } from '../src/reference/distill.ts';
import { randn } from '../src/util/random.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { ShapeError } from '../src/tensor/errors.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, type Tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

const sig = (x: number) => 1 / (1 + Math.exp(-x));
const f32 = (xs: readonly number[]) => Float32Array.from(xs);

// Four valid tokens and one padding position (weight 0) whose values would dominate if
// it leaked in.
const W5 = [0.25, 0.25, 0.25, 0.25, 0];
const LP = [-1, -2, -0.5, -3, -7];
const LT = [-0.5, -2.5, -0.5, -1, 5]; // Δ = 0.5, -0.5, 0, 2, (12)
const LOLD = [-1.1, -2, -0.6, -2.9, -7];

function inputs(lp: Tensor, lt: readonly number[], lold: readonly number[], w: readonly number[]): DistillInputs {
  return { logprobs: lp, teacherLogprobs: tensor(f32(lt)), oldLogprobs: tensor(f32(lold)), weights: tensor(f32(w)) };
}

/** Runs fn on a differentiable lθ and returns the scalars it names plus d term / d lθ. */
async function withGrad(lp: readonly number[], fn: (lp: Tensor) => { term: Tensor } & Record<string, Tensor>) {
  await gpu();
  return scopeAsync(async () => {
    const l = requireGrad(tensor(f32(lp)));
    const out = fn(l);
    backward(out.term);
    const values: Record<string, number> = {};
    for (const [k, t] of Object.entries(out)) values[k] = (await read(t))[0];
    return { values, grad: await read(l.grad!) };
  });
}

describe('SDAR (gated self-distillation)', () => {
  test('reference, beta = 0 (GRPO+OPSD): a constant gate 0.5', () => {
    const r = sdarTermRef(LP, LT, W5, 0);
    assert.deepEqual([...r.gate], [0.5, 0.5, 0.5, 0.5, 0.5]);
    // 0.5 · (0.5 − 0.5 + 0 + 2) / 4
    assertClose([r.value, r.gateMean, r.gateShare, r.gap], [0.25, 0.5, 0, 0.5], { atol: 1e-15, label: 'sdar beta 0' });
    assertClose(r.grad, [-0.125, -0.125, -0.125, -0.125, 0], { atol: 1e-15, label: 'sdar beta 0 grad' });
  });

  test('reference, beta = 2: g = σ(2Δ), share counts g > 0.5 strictly', () => {
    const r = sdarTermRef(LP, LT, W5, 2);
    const g = [sig(1), sig(-1), 0.5, sig(4), sig(24)];
    assertClose(r.gate, g, { atol: 1e-15, label: 'gate' });
    const value = 0.25 * (sig(1) * 0.5 + sig(-1) * -0.5 + 0.5 * 0 + sig(4) * 2);
    // σ(1) + σ(−1) = 1; tokens 0 and 3 have g > 0.5, token 2 sits exactly at 0.5.
    assertClose([r.value, r.gateMean, r.gateShare, r.gap], [value, 0.25 * (1 + 0.5 + sig(4)), 0.5, 0.5], { atol: 1e-15, label: 'sdar beta 2' });
    assertClose(r.grad, [-0.25 * sig(1), -0.25 * sig(-1), -0.125, -0.25 * sig(4), 0], { atol: 1e-15, label: 'sdar beta 2 grad' });
  });

  test('GPU term, metrics and gradient (−g·weight) match the reference', async () => {
    const lpOdd = [...randn(7, 11, 0.5)].map((v) => v - 1);
    const ltOdd = [...randn(7, 12, 0.5)].map((v) => v - 1);
    const wOdd = [0.2, 0.2, 0, 0.2, 0.2, 0, 0.2];
    const cases: [number[], number[], number[], number][] = [
      [LP, LT, W5, 0], [LP, LT, W5, 2], [LP, LT, W5, 5], [lpOdd, ltOdd, wOdd, 5],
    ];
    for (const [lp, lt, w, beta] of cases) {
      const label = `sdar n=${lp.length} beta=${beta}`;
      const r = sdarTermRef(f32(lp), f32(lt), w, beta);
      const { values, grad } = await withGrad(lp, (l) => ({ ...sdarTerm(inputs(l, lt, lp, w), beta) }));
      assertClose([values.term, values.gateMean, values.gateShare, values.gap], [r.value, r.gateMean, r.gateShare, r.gap], { atol: 1e-6, label });
      assertClose(grad, r.grad, { atol: 1e-7, label: `${label} grad` });
    }
  });

  test('gradient with the gate held fixed passes finite differences', async () => {
    await gpu();
    const lp = f32([-1.2, -0.4, -2.1, -0.9, -3]);
    await scopeAsync(async () => {
      const gate = sdarGate(inputs(tensor(lp), LT, LOLD, W5), 5);
      await gradCheck((l) => gatedTerm(inputs(l, LT, LOLD, W5), gate).term, [{ data: lp, shape: [5] }], { eps: 1e-3, label: 'sdar fixed gate' });
    });
  });

  test('mismatched lengths throw ShapeError naming the function and shapes', async () => {
    await gpu();
    await scopeAsync(async () => {
      assert.throws(() => sdarTerm(inputs(tensor(f32(LP)), LT.slice(0, 4), LOLD, W5), 5), (e: Error) =>
        e instanceof ShapeError && /sdarTerm/.test(e.message) && /\[5\]/.test(e.message) && /\[4\]/.test(e.message));
    });
    assert.throws(() => sdarTermRef(LP, LT, W5.slice(0, 3), 5), (e: Error) => e instanceof ShapeError && /sdarTermRef/.test(e.message) && /\[3\]/.test(e.message));
  });
});

describe('Skill-SD (sampled-token reverse KL)', () => {
  const defaults = { ratioCap: 10, gapCap: 20 };

  test('reference: lT = lθ gives k3 = 0, term 0 and gradient 0', () => {
    const r = skillSdTermRef(LP, LP, LOLD, W5, defaults);
    // ρ = exp(lθ − lold) = e^0.1, e^0, e^0.1, e^-0.1 on the valid tokens
    assertClose([r.value, r.k3Mean, r.ratioMean], [0, 0, 0.25 * (2 * Math.exp(0.1) + 1 + Math.exp(-0.1))], { atol: 1e-15, label: 'skill-sd equal' });
    assertClose(r.grad, [0, 0, 0, 0, 0], { atol: 1e-15, label: 'skill-sd equal grad' });
  });

  // ratioCap 0.5, gapCap 1: token 0 uncapped, token 1 gap capped, token 2 ratio capped,
  // token 3 both capped, token 4 padding.
  const capped = { ratioCap: 0.5, gapCap: 1 };
  const CLP = [-1, -3, -0.2, -2, -1];
  const CLT = [-1.5, -1, -0.4, 0, -9];
  const CLOLD = [-1.2, -3.1, -1.2, -3, -9];

  test('reference: clipping of ρ at ratioCap and of the gap at gapCap', () => {
    const r = skillSdTermRef(CLP, CLT, CLOLD, W5, capped);
    const e = Math.E;
    // token: (ρ, k3, dρ, dk3)
    const t0 = [Math.exp(0.2), Math.exp(-0.5) - 1 + 0.5, Math.exp(0.2), 1 - Math.exp(-0.5)];
    const t1 = [Math.exp(0.1), e - 1 - 2, Math.exp(0.1), 1];
    const t2 = [Math.exp(0.5), Math.exp(-0.2) - 1 + 0.2, 0, 1 - Math.exp(-0.2)];
    const t3 = [Math.exp(0.5), e - 1 - 2, 0, 1];
    const toks = [t0, t1, t2, t3];
    const value = 0.25 * toks.reduce((s, [rho, k3]) => s + rho * k3, 0);
    const k3Mean = 0.25 * toks.reduce((s, [, k3]) => s + k3, 0);
    const ratioMean = 0.25 * (Math.exp(0.2) + Math.exp(0.1) + 2 * Math.exp(0.5));
    assertClose([r.value, r.k3Mean, r.ratioMean], [value, k3Mean, ratioMean], { atol: 1e-14, label: 'skill-sd capped' });
    assertClose(r.grad, [...toks.map(([rho, k3, drho, dk3]) => 0.25 * (drho * k3 + rho * dk3)), 0], { atol: 1e-14, label: 'skill-sd capped grad' });
  });

  test('GPU term, metrics and gradient match the reference', async () => {
    const lpOdd = [...randn(7, 21, 0.4)].map((v) => v - 1);
    const ltOdd = [...randn(7, 22, 0.4)].map((v) => v - 1);
    const loldOdd = [...randn(7, 23, 0.4)].map((v) => v - 1);
    const wOdd = [0.2, 0, 0.2, 0.2, 0.2, 0.2, 0];
    const cases: [string, number[], number[], number[], number[], typeof defaults][] = [
      ['equal', LP, LP, LOLD, W5, defaults], ['capped', CLP, CLT, CLOLD, W5, capped],
      ['defaults', CLP, CLT, CLOLD, W5, defaults], ['odd', lpOdd, ltOdd, loldOdd, wOdd, defaults],
    ];
    for (const [label, lp, lt, lold, w, cfg] of cases) {
      const r = skillSdTermRef(f32(lp), f32(lt), f32(lold), w, cfg);
      const { values, grad } = await withGrad(lp, (l) => ({ ...skillSdTerm(inputs(l, lt, lold, w), cfg) }));
      assertClose([values.term, values.k3Mean, values.ratioMean], [r.value, r.k3Mean, r.ratioMean], { atol: 1e-6, label });
      assertClose(grad, r.grad, { atol: 1e-6, label: `${label} grad` });
    }
  });

  test('gradient (through ρ and k3, capped and uncapped) passes finite differences', async () => {
    await gpu();
    for (const [label, cfg] of [['capped', capped], ['defaults', defaults]] as const) {
      await gradCheck((l) => skillSdTerm(inputs(l, CLT, CLOLD, W5), cfg).term, [{ data: f32(CLP), shape: [5] }], { eps: 1e-3, label: `skill-sd ${label}` });
    }
  });

  test('mismatched lengths throw ShapeError naming the function and shapes', async () => {
    await gpu();
    await scopeAsync(async () => {
      assert.throws(() => skillSdTerm(inputs(tensor(f32(LP)), LT, LOLD.slice(0, 2), W5), defaults), (e: Error) =>
        e instanceof ShapeError && /skillSdTerm/.test(e.message) && /oldLogprobs \[2\]/.test(e.message));
    });
    assert.throws(() => skillSdTermRef(LP, LT, LOLD, W5.slice(0, 4), defaults), (e: Error) => e instanceof ShapeError && /skillSdTermRef/.test(e.message));
  });
});

describe('PCSD (our reading of the abstract)', () => {
  // Two responses of three tokens, each followed by one padding position.
  const segments = [{ start: 0, length: 3 }, { start: 4, length: 3 }];
  const cfg = { beta: 0.5, gamma: 2, decay: 0.5, trendWindow: 2 };
  const DELTA = [1, 2, -1, 9, 4, 0, -2, 9];
  // Segment 1: S = 1, 0.5·1 + 2 = 2.5, 0.5·2.5 − 1 = 0.25; trend = (1 − 0)/2, (2.5 − 0)/2, (0.25 − 1)/2.
  // Segment 2 restarts: S = 4, 2, −1; trend = 4/2, 2/2, (−1 − 4)/2.
  const S = [1, 2.5, 0.25, 0, 4, 2, -1, 0];
  const TREND = [0.5, 1.25, -0.375, 0, 2, 1, -2.5, 0];
  // w = σ(0.5·(S + 2·trend)) = σ(0.5·(2, 5, −0.5, 8, 4, −6)); padding 0.
  const GATE = [sig(1), sig(2.5), sig(-0.25), 0, sig(4), sig(2), sig(-3), 0];
  const W8 = [1 / 6, 1 / 6, 1 / 6, 0, 1 / 6, 1 / 6, 1 / 6, 0];
  const PLP = [-1, -2, -0.5, -1, -3, -0.7, -0.2, -1];
  const PLT = PLP.map((v, i) => v + DELTA[i]);

  test('pcsdGate: decayed running sum and trend restart per segment; padding gets 0', () => {
    assertClose(pcsdGate(f32(DELTA), segments, cfg), GATE, { atol: 1e-7, label: 'pcsd gate' });
  });

  test('reference: S, trend, gate and the gated term', () => {
    const r = pcsdTermRef(PLP, PLT, W8, segments, cfg);
    assertClose(r.running, S, { atol: 1e-14, label: 'S' });
    assertClose(r.trend, TREND, { atol: 1e-14, label: 'trend' });
    assertClose(r.gate, GATE, { atol: 1e-14, label: 'gate' });
    const value = (sig(1) * 1 + sig(2.5) * 2 + sig(-0.25) * -1 + sig(4) * 4 + sig(2) * 0 + sig(-3) * -2) / 6;
    const gateMean = (sig(1) + sig(2.5) + sig(-0.25) + sig(4) + sig(2) + sig(-3)) / 6;
    assertClose([r.value, r.gateMean], [value, gateMean], { atol: 1e-14, label: 'pcsd term' });
    assertClose(r.grad, GATE.map((g, i) => -g * W8[i]), { atol: 1e-14, label: 'pcsd grad' });
  });

  test('pcsdGate matches the reference on longer segments (window reaching back W tokens)', () => {
    const lp = randn(20, 31, 0.5);
    const lt = randn(20, 32, 0.5);
    const segs = [{ start: 1, length: 9 }, { start: 10, length: 1 }, { start: 12, length: 7 }];
    const c = { beta: 3, gamma: 0.7, decay: 0.8, trendWindow: 3 };
    const delta = lt.map((v, i) => v - lp[i]);
    const r = pcsdTermRef(lp, lt, new Float32Array(20), segs, c);
    assertClose(pcsdGate(delta, segs, c), r.gate, { atol: 1e-6, label: 'pcsd gate vs ref' });
  });

  test('GPU term and gradient match the reference and pass finite differences', async () => {
    const r = pcsdTermRef(f32(PLP), f32(PLT), W8, segments, cfg);
    const gateData = pcsdGate(f32(DELTA), segments, cfg);
    const { values, grad } = await withGrad(PLP, (l) => ({ ...pcsdTerm(inputs(l, PLT, PLP, W8), tensor(gateData)) }));
    assertClose([values.term, values.gateMean], [r.value, r.gateMean], { atol: 1e-6, label: 'pcsd gpu' });
    assertClose(grad, r.grad, { atol: 1e-7, label: 'pcsd gpu grad' });
    await scopeAsync(async () => {
      const gate = tensor(gateData);
      await gradCheck((l) => pcsdTerm(inputs(l, PLT, PLP, W8), gate).term, [{ data: f32(PLP), shape: [8] }], { eps: 1e-3, probe: 8, label: 'pcsd' });
    });
  });

  test('bad segments, windows and gate lengths throw', async () => {
    assert.throws(() => pcsdGate(f32(DELTA), [{ start: 6, length: 3 }], cfg), (e: Error) => e instanceof ShapeError && /pcsdGate/.test(e.message));
    assert.throws(() => pcsdGate(f32(DELTA), segments, { ...cfg, trendWindow: 0 }), RangeError);
    await gpu();
    await scopeAsync(async () => {
      assert.throws(() => pcsdTerm(inputs(tensor(f32(PLP)), PLT, PLP, W8), tensor(f32(GATE.slice(0, 7)))), (e: Error) =>
        e instanceof ShapeError && /pcsdTerm/.test(e.message) && /gate \[7\]/.test(e.message));
    });
  });
});
