// The advantage transforms of RLSD, AgentOPSD, ADRS and GiGPO on hand-made inputs;
// expected values are worked out in this file from the formulas of
// docs/ALGORITHMS.md section 3, not from the implementation's helpers. The last
// test feeds RLSD's per-token advantages through the GPU policy loss.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { adrsActive, adrsAdvantages, adrsEntropyCoef, groupSpread } from '../src/algos/methods/adrs.ts';
import { lowerMedian } from '../src/algos/token_stats.ts';
import { agentOpsdAdvantages } from '../src/algos/methods/agent_opsd.ts';
import { drGrpo } from '../src/algos/methods/dr_grpo.ts';
import { gigpoAdvantages } from '../src/algos/methods/gigpo.ts';
import { DEFAULT_POLICY_LOSS, policyLoss } from '../src/algos/policy_loss.ts';
import { rlsdAdvantages, rlsdLambda } from '../src/algos/methods/rlsd.ts';
import { ShapeError } from '../src/tensor/errors.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { resolveConfig, TrainConfigSchema } from '../src/config/config_schema.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const DEFAULTS = resolveConfig(TrainConfigSchema.parse({})).algorithm;
const sig = (x: number) => 1 / (1 + Math.exp(-x));
const f32 = (rows: number[][]) => rows.map((r) => Float32Array.from(r));
const ids = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const close = (actual: Float32Array[], expected: number[][], label: string) => {
  assert.equal(actual.length, expected.length, `${label}: samples`);
  actual.forEach((a, i) => assertClose(a, expected[i], { atol: 1e-6, rtol: 1e-6, label: `${label} sample ${i}` }));
};

describe('RLSD', () => {
  const cfg = DEFAULTS.rlsd;

  test('the schema defaults are the text\'s (λ 0.5 over 100 iterations, w clipped to [0.8, 1.2])', () => {
    assert.deepEqual(cfg, { lambdaStart: 0.5, decayIterations: 100, clipLow: 0.8, clipHigh: 1.2 });
  });

  test('λ = lambdaStart·(1 − t/decayIterations) at iteration t, as the reference steps it, and 0 from t = decayIterations on', () => {
    assertClose([rlsdLambda(1, cfg)], [0.495], { atol: 1e-15 });
    assertClose([rlsdLambda(50, cfg)], [0.25], { atol: 1e-15 });
    assertClose([rlsdLambda(99, cfg)], [0.005], { atol: 1e-15 });
    assert.equal(rlsdLambda(100, cfg), 0);
    assert.equal(rlsdLambda(150, cfg), 0);
    assert.equal(rlsdLambda(3, { ...cfg, lambdaStart: 1, decayIterations: 4 }), 0.25);
    assert.throws(() => rlsdLambda(0, cfg), /rlsdLambda: iteration must be an integer >= 1, got 0/);
  });

  // Gaps lT − lold: sample 0 [0.125, 0.5, −0.5] with A = 2, sample 1 [0.125, −0.5]
  // with A = −1 (sign flips the exponent), sample 2 [3, −3] with A = 0.
  const samples = [{ responseIds: ids(3) }, { responseIds: ids(2) }, { responseIds: ids(2) }];
  const adv = Float64Array.from([2, -1, 0]);
  const teacher = f32([[-1, -0.5, -2], [-1, -2], [0, -3]]);
  const old = f32([[-1.125, -1, -1.5], [-1.125, -1.5], [-3, 0]]);
  // w: exp(0.125); exp(0.5) = 1.65 -> 1.2; exp(-0.5) = 0.61 -> 0.8 | exp(-0.125); exp(0.5) -> 1.2 | 1, 1
  const expectedHalf = [
    [2 * (0.5 + 0.5 * Math.exp(0.125)), 2 * (0.5 + 0.5 * 1.2), 2 * (0.5 + 0.5 * 0.8)],
    [-1 * (0.5 + 0.5 * Math.exp(-0.125)), -1 * (0.5 + 0.5 * 1.2)],
    [0, 0],
  ];

  test('Â = A·[(1−λ) + λ·w] with w clipped on both sides and sign(A) < 0 flipping the gap', () => {
    const r = rlsdAdvantages(samples, adv, teacher, old, 0.5, cfg);
    close(r.advantages, expectedHalf, 'rlsd λ=0.5');
    assert.equal(r.metrics['rlsd/lambda'], 0.5);
    assertClose([r.metrics['rlsd/weight_mean']], [(Math.exp(0.125) + 1.2 + 0.8 + Math.exp(-0.125) + 1.2 + 1 + 1) / 7], { atol: 1e-12 });
    assert.equal(r.metrics['rlsd/clip_frac'], 3 / 7);
  });

  test('λ = 0 is plain GRPO, λ = 1 is A·w', () => {
    close(rlsdAdvantages(samples, adv, teacher, old, 0, cfg).advantages, [[2, 2, 2], [-1, -1], [0, 0]], 'rlsd λ=0');
    close(rlsdAdvantages(samples, adv, teacher, old, 1, cfg).advantages, [[2 * Math.exp(0.125), 2.4, 1.6], [-Math.exp(-0.125), -1.2], [0, 0]], 'rlsd λ=1');
  });

  test('bad inputs name the function, the sample and the problem', () => {
    assert.throws(() => rlsdAdvantages(samples, adv, f32([[-1, -0.5, -2], [-1], [0, -3]]), old, 0.5, cfg),
      (e: Error) => e instanceof ShapeError && /rlsdAdvantages: sample 1: 1 teacher log-probs for 2 response tokens/.test(e.message));
    assert.throws(() => rlsdAdvantages(samples, adv, f32([[-1, -0.5, -2], [-1, -2], [0, NaN]]), old, 0.5, cfg),
      /rlsdAdvantages: sample 2: teacher log-probs\[1\] is NaN/);
    assert.throws(() => rlsdAdvantages(samples, Float64Array.from([1, 2]), teacher, old, 0.5, cfg), /rlsdAdvantages: 2 advantages for 3 samples/);
    assert.throws(() => rlsdAdvantages(samples, adv, teacher, old.slice(0, 2), 0.5, cfg), /rlsdAdvantages: 2 arrays of old log-probs for 3 samples/);
  });
});

describe('AgentOPSD', () => {
  // The hand-worked cases below read V0 as a success rate (R / 10); the reference's raw-score prior has its own test.
  const cfg = { ...DEFAULTS.agent_opsd, granularity: 'turn' as const, prior: 'success_rate' as const };

  test('the schema defaults are the reference launchers\'', () => {
    const { granularity: _, ...rest } = DEFAULTS.agent_opsd;
    assert.deepEqual(rest, { scale: 0.2, clipLow: 0.8, clipHigh: 1.2, mix: 0.5, priorClamp: 1e-4, prior: 'raw_score' });
  });

  // Group g: trajectory a (R = 10, two turns, listed out of order) and b (R = 0, one
  // turn), so V0 = (1 + 0)/2 = 0.5. Group h: trajectory c (R = 0, two turns), so V0 is
  // clamped up to 1e-4.
  const samples = [
    { groupId: 'g', trajectoryId: 'a', turn: 1, episodeReturn: 10, score: 10, responseIds: ids(3) },
    { groupId: 'g', trajectoryId: 'a', turn: 0, episodeReturn: 10, score: 10, responseIds: ids(2) },
    { groupId: 'g', trajectoryId: 'b', turn: 0, episodeReturn: 0, score: 0, responseIds: ids(2) },
    { groupId: 'h', trajectoryId: 'c', turn: 0, episodeReturn: 0, score: 0, responseIds: ids(1) },
    { groupId: 'h', trajectoryId: 'c', turn: 1, episodeReturn: 0, score: 0, responseIds: ids(2) },
  ];
  const adv = Float64Array.from([-0.5, 1.5, -1, 0.8, 0.8]);
  // d per turn: a: turn 0 0.5 + 0.5 = 1, turn 1 −0.25 − 0.25 − 0.5 = −1; b: 0.75 − 2; c: 2, then 0.5 − 0.5 = 0.
  const teacher = f32([[-0.25, -0.25, -0.5], [-0.5, -0.5], [-0.25, -3], [-1], [-0.5, -1.5]]);
  const old = f32([[0, 0, 0], [-1, -1], [-1, -1], [-3], [-1, -1]]);

  // a: V = σ(0 + 1), σ(0 + 1 − 1) = 0.5; q = [σ(1) − 0.5, 0.5 − σ(1)], mean 0, std σ(1) − 0.5.
  const cA = sig(1) - 0.5;
  const zA = cA / (cA + 1e-6);
  // c: logit V0 = ln(1e-4 / 0.9999); V = σ(ℓ + 2) twice; q = [σ(ℓ + 2) − 1e-4, 0], mean = std = q0/2.
  const q0C = sig(Math.log(1e-4 / (1 - 1e-4)) + 2) - 1e-4;
  const zC = (q0C / 2) / (q0C / 2 + 1e-6);

  test('turn granularity: belief increments, z-scored per episode, scale the turn\'s advantage', () => {
    const r = agentOpsdAdvantages(samples, adv, teacher, old, cfg, 10);
    // Turn 1 has A < 0 and z < 0, so its multiplier also grows: 1 + 0.2·(−1)·(−zA).
    const mA = 1 + 0.2 * zA;
    close(r.advantages, [
      [-0.5 * (0.5 + 0.5 * mA), -0.5 * (0.5 + 0.5 * mA), -0.5 * (0.5 + 0.5 * mA)],
      [1.5 * (0.5 + 0.5 * mA), 1.5 * (0.5 + 0.5 * mA)],
      [-1, -1], // a one-turn episode has z = 0, m = 1
      [0.8 * (0.5 + 0.5 * (1 + 0.2 * zC))],
      [0.8 * (0.5 + 0.5 * (1 - 0.2 * zC)), 0.8 * (0.5 + 0.5 * (1 - 0.2 * zC))],
    ], 'agent_opsd turn');
    assertClose([r.metrics['agent_opsd/prior_mean']], [(0.5 + 1e-4) / 2], { atol: 1e-12 });
    assert.equal(r.metrics['agent_opsd/clip_frac'], 0);
  });

  test('turn granularity at scale 0.5 clips the multiplier to [0.8, 1.2]', () => {
    const r = agentOpsdAdvantages(samples, adv, teacher, old, { ...cfg, scale: 0.5 }, 10);
    // m = 1 ± 0.5·z with |z| ≈ 0.99 → 1.2 or 0.8.
    close(r.advantages, [
      [-0.5 * 1.1, -0.5 * 1.1, -0.5 * 1.1], [1.5 * 1.1, 1.5 * 1.1], [-1, -1], [0.8 * 1.1], [0.8 * 0.9, 0.8 * 0.9],
    ], 'agent_opsd turn, clipped');
    assert.equal(r.metrics['agent_opsd/clip_frac'], 8 / 10);
    assertClose([r.metrics['agent_opsd/multiplier_mean']], [(6 * 1.2 + 2 * 1 + 2 * 0.8) / 10], { atol: 1e-12 });
  });

  test('token granularity: each token a step inside its response', () => {
    // V0 = 0.5 (trajectories a: 1, b: 0). Gaps [1, −1, 0] give q = [c, −c, 0] with
    // c = σ(1) − 0.5, mean 0, population variance 2c²/3; a one-token response has z = 0.
    const tokenSamples = [
      { groupId: 'g', trajectoryId: 'a', turn: 0, episodeReturn: 10, score: 10, responseIds: ids(3) },
      { groupId: 'g', trajectoryId: 'b', turn: 0, episodeReturn: 0, score: 0, responseIds: ids(3) },
      { groupId: 'g', trajectoryId: 'a', turn: 1, episodeReturn: 10, score: 10, responseIds: ids(1) },
    ];
    const tAdv = Float64Array.from([2, -2, 2]);
    const tTeacher = f32([[0, -2, -1], [0, -2, -1], [4]]);
    const tOld = f32([[-1, -1, -1], [-1, -1, -1], [-1]]);
    // The token z-score's denominator is √(variance + 1e-6) + 1e-6, as the reference's.
    const z = cA / (Math.sqrt((cA * cA + cA * cA + 0) / 3 + 1e-6) + 1e-6);
    const tokenCfg = { ...cfg, granularity: 'token' as const };
    // 0.2·z = 0.245: clipped to 1.2 / 0.8 for A > 0, the other way for A < 0.
    close(agentOpsdAdvantages(tokenSamples, tAdv, tTeacher, tOld, tokenCfg, 10).advantages,
      [[2.2, 1.8, 2], [-1.8, -2.2, -2], [2]], 'agent_opsd token, clipped');
    close(agentOpsdAdvantages(tokenSamples, tAdv, tTeacher, tOld, { ...tokenCfg, scale: 0.1 }, 10).advantages, [
      [2 * (0.5 + 0.5 * (1 + 0.1 * z)), 2 * (0.5 + 0.5 * (1 - 0.1 * z)), 2],
      [-2 * (0.5 + 0.5 * (1 - 0.1 * z)), -2 * (0.5 + 0.5 * (1 + 0.1 * z)), -2],
      [2],
    ], 'agent_opsd token');
  });

  test('the reference prior averages each trajectory\'s first-turn raw score, and beliefs stay inside [1e-6, 1 − 1e-6]', () => {
    // Group g: trajectory x's first turn was invalid (score 10 − 0.1), y lost (0): V0 = 4.95, clamped to 0.9999.
    // Group h: trajectory w lost (V0 clamped to 1e-4) with gaps −6, +3, +3, so that its
    // first belief σ(ℓ − 6) ≈ 2.5e-7 is clamped up to 1e-6, which moves every z-score.
    const raw = [
      { groupId: 'g', trajectoryId: 'x', turn: 0, episodeReturn: 10, score: 9.9, responseIds: ids(1) },
      { groupId: 'g', trajectoryId: 'x', turn: 1, episodeReturn: 10, score: 10, responseIds: ids(1) },
      { groupId: 'g', trajectoryId: 'y', turn: 0, episodeReturn: 0, score: 0, responseIds: ids(1) },
      { groupId: 'h', trajectoryId: 'w', turn: 0, episodeReturn: 0, score: 0, responseIds: ids(1) },
      { groupId: 'h', trajectoryId: 'w', turn: 1, episodeReturn: 0, score: 0, responseIds: ids(1) },
      { groupId: 'h', trajectoryId: 'w', turn: 2, episodeReturn: 0, score: 0, responseIds: ids(1) },
    ];
    const rAdv = Float64Array.from([1, 1, -1, -1, -1, -1]);
    /** The text's turn recipe for one episode: multipliers m_k from prior v0 and gaps d. */
    const multipliers = (v0: number, d: number[], a: number) => {
      let l = Math.log(v0 / (1 - v0));
      let prev = v0;
      const q = d.map((dk) => {
        l += dk;
        const v = Math.min(Math.max(sig(l), 1e-6), 1 - 1e-6);
        const inc = v - prev;
        prev = v;
        return inc;
      });
      const mean = q.reduce((s, v) => s + v, 0) / q.length;
      const std = Math.sqrt(q.reduce((s, v) => s + (v - mean) ** 2, 0) / q.length);
      return q.map((v) => Math.min(1.2, Math.max(0.8, 1 + 0.2 * Math.sign(a) * ((v - mean) / (std + 1e-6)))));
    };
    const mx = multipliers(1 - 1e-4, [20, -30], 1);
    const mw = multipliers(1e-4, [-6, 3, 3], -1);
    const r = agentOpsdAdvantages(raw, rAdv, f32([[19], [-31], [0], [-7], [2], [2]]), f32([[-1], [-1], [0], [-1], [-1], [-1]]), { ...DEFAULTS.agent_opsd, granularity: 'turn' }, 10);
    close(r.advantages, [[0.5 + 0.5 * mx[0]], [0.5 + 0.5 * mx[1]], [-1], ...mw.map((m) => [-(0.5 + 0.5 * m)])], 'agent_opsd raw-score prior');
    assertClose([r.metrics['agent_opsd/prior_mean']], [(1 - 1e-4 + 1e-4) / 2], { atol: 1e-12 });
  });

  test('inconsistent trajectories and bad log-probs are refused', () => {
    const broken = samples.map((s, i) => (i === 4 ? { ...s, episodeReturn: 10 } : s));
    assert.throws(() => agentOpsdAdvantages(broken, adv, teacher, old, cfg, 10), /agentOpsdAdvantages: sample 4: trajectory "c" has episode returns 0 and 10/);
    const gap = samples.map((s, i) => (i === 4 ? { ...s, turn: 2 } : s));
    assert.throws(() => agentOpsdAdvantages(gap, adv, teacher, old, cfg, 10), /agentOpsdAdvantages: sample 4: trajectory "c" has turns 0, 2/);
    assert.throws(() => agentOpsdAdvantages(samples, adv, teacher, f32([[0, 0, 0], [-1, -1], [-1, -1], [-3], [-1]]), cfg, 10),
      /agentOpsdAdvantages: sample 4: 1 old log-probs for 2 response tokens/);
    assert.throws(() => agentOpsdAdvantages(samples, adv, teacher, old, cfg, 0), /agentOpsdAdvantages: maxReturn must be a positive number/);
  });
});

describe('ADRS', () => {
  const cfg = DEFAULTS.adrs;

  test('the schema defaults are the text\'s; active for iterations 21..70 with entropy coefficient 0.01', () => {
    assert.deepEqual(cfg, {
      shapingCoef: 0.02, gateScale: 2, eta: 0.02, startIteration: 21, endIteration: 70, clip: 0.2, entropyCoef: 0.01, adaptiveClip: true, activeEntropy: true,
    });
    assert.deepEqual([20, 21, 70, 71].map((k) => adrsActive(k, cfg)), [false, true, true, false]);
    assert.deepEqual([20, 21, 70, 71].map((k) => adrsEntropyCoef(k, cfg, 0.001)), [0.001, 0.01, 0.01, 0.001]);
  });

  test('the WebShop launchers\' switches: shop turns the adaptive clip and the raised entropy off', () => {
    const shop = resolveConfig(TrainConfigSchema.parse({ env: { name: 'shop' } })).algorithm.adrs;
    assert.deepEqual([shop.adaptiveClip, shop.activeEntropy], [false, false]);
    assert.deepEqual([20, 21, 70, 71].map((k) => adrsEntropyCoef(k, shop, 0.001)), [0.001, 0.001, 0.001, 0.001]);
    const search = resolveConfig(TrainConfigSchema.parse({ env: { name: 'search' } })).algorithm.adrs;
    assert.deepEqual([search.adaptiveClip, search.activeEntropy], [true, true]);
    const own = resolveConfig(TrainConfigSchema.parse({ env: { name: 'shop' }, algorithm: { adrs: { adaptiveClip: true } } })).algorithm.adrs;
    assert.deepEqual([own.adaptiveClip, own.activeEntropy], [true, false]);
  });

  // g1: two samples with returns 10 and 0; g2: a group of one (no spread).
  const samples = [
    { groupId: 'g1', score: 10, responseIds: ids(3) },
    { groupId: 'g1', score: 0, responseIds: ids(2) },
    { groupId: 'g2', score: 1, responseIds: ids(2) },
  ];
  const adv = Float64Array.from([0.7, -0.7, 0]);
  const teacher = f32([[-1, -2, -3], [-0.5, -1.5], [-2, -2]]);

  test('shaped bonus inside a group with spread, exact values at an active iteration', () => {
    const r = adrsAdvantages(samples, adv, teacher, 21, cfg);
    // τ̄ = −2, −1, −2; batch mean −5/3; α = σ(−1/3), σ(2/3), σ(−1/3).
    const a0 = sig(-1 / 3);
    const a1 = sig(2 / 3);
    const tva = (a0 * 10 + a1 * 0) / (a0 + a1) - ((1 - a0) * 10 + (1 - a1) * 0) / ((1 - a0) + (1 - a1));
    const m = sig(2 * tva);
    // r: sample 0 [1, 0, −1]/(√(2/3) + 1e-6), sample 1 [0.5, −0.5]/(0.5 + 1e-6).
    const ra = 1 / (Math.sqrt(2 / 3) + 1e-6);
    const rb = 0.5 / (0.5 + 1e-6);
    const k = 0.02 * m;
    // r' = k·r has mean 0 over g1's five tokens; its population std:
    const std = k * Math.sqrt((2 * ra * ra + 2 * rb * rb) / 5);
    // η = 0.02; bound 0.2·min(1, σ/median σ) = 0.2 with one group with spread: no clipping.
    const bonus = (r: number) => 0.02 * (k * r) / (std + 1e-6);
    close(r.advantages, [
      [0.7 + bonus(ra), 0.7, 0.7 + bonus(-ra)],
      [-0.7 + bonus(rb), -0.7 + bonus(-rb)],
      [0, 0],
    ], 'adrs');
    assert.equal(r.metrics['adrs/eta'], 0.02);
    assert.equal(r.metrics['adrs/groups_with_spread'], 0.5);
    // g2 alone: TVA = α·1/α − (1−α)·1/(1−α) = 0, gate 0.5.
    assertClose([r.metrics['adrs/tva_mean'], r.metrics['adrs/gate_mean']], [tva / 2, (m + 0.5) / 2], { atol: 1e-12 });
    assert.equal(r.metrics['adrs/clip_frac'], 0);
  });

  test('inactive iterations leave A unchanged', () => {
    for (const it of [1, 20, 71, 150]) {
      const r = adrsAdvantages(samples, adv, teacher, it, cfg);
      assert.deepEqual(r.advantages, f32([[0.7, 0.7, 0.7], [-0.7, -0.7], [0, 0]]), `iteration ${it}`);
      assert.equal(r.metrics['adrs/eta'], 0);
    }
  });

  test('clip bound ±clip·min(1, σ_group / median σ_group); groups without spread untouched', () => {
    // Returns (0, 1), (0, 2), (0, 4), (3, 3): σ (unbiased) √0.5, √2, √8, 0; median of
    // the three with spread √2, so bounds 0.1, 0.2, 0.2. η = 10 pushes every
    // standardised bonus (≈ ±1, the sign of the token's lT against its response's
    // mean) far past its bound.
    const s = [[0, 1], [0, 2], [0, 4], [3, 3]].flatMap(([ra, rb], g) => [
      { groupId: `g${g}`, score: ra, responseIds: ids(2) },
      { groupId: `g${g}`, score: rb, responseIds: ids(2) },
    ]);
    const a = Float64Array.from([-0.5, 0.5, -0.5, 0.5, -0.5, 0.5, 0, 0]);
    const lt = f32([[-1, -2], [-3, -1], [-1, -2], [-1, -2], [-2, -1], [-1, -2], [-1, -5], [-1, -5]]);
    const r = adrsAdvantages(s, a, lt, 30, { ...cfg, eta: 10 });
    close(r.advantages, [
      [-0.4, -0.6], [0.4, 0.6], [-0.3, -0.7], [0.7, 0.3], [-0.7, -0.3], [0.7, 0.3], [0, 0], [0, 0],
    ], 'adrs clipped');
    assert.equal(r.metrics['adrs/clip_frac'], 1);
    assert.equal(r.metrics['adrs/groups_with_spread'], 3 / 4);
    // Without the adaptive clip every group's bound is the clip itself.
    const flat = adrsAdvantages(s, a, lt, 30, { ...cfg, eta: 10, adaptiveClip: false });
    close(flat.advantages, [
      [-0.3, -0.7], [0.3, 0.7], [-0.3, -0.7], [0.7, 0.3], [-0.7, -0.3], [0.7, 0.3], [0, 0], [0, 0],
    ], 'adrs clipped without the adaptive bound');
  });

  test('an even number of groups with spread: the lower middle σ (torch.median), σ = √(var + 1e-8)', () => {
    // Returns (0, 1), (0, 2), (0, 4), (0, 8): unbiased variances 0.5, 2, 8, 32; σ = √(v + 1e-8).
    // The lower middle of the four is √(2 + 1e-8) (the mean of the two middle ones
    // would be (√2 + √8)/2 and give g0 a bound of 0.0667, g1 0.1333).
    const s = [[0, 1], [0, 2], [0, 4], [0, 8]].flatMap(([ra, rb], g) => [
      { groupId: `g${g}`, score: ra, responseIds: ids(2) },
      { groupId: `g${g}`, score: rb, responseIds: ids(2) },
    ]);
    const a = Float64Array.from([-0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5]);
    const lt = f32([[-1, -2], [-1, -2], [-1, -2], [-1, -2], [-1, -2], [-1, -2], [-1, -2], [-1, -2]]);
    const r = adrsAdvantages(s, a, lt, 30, { ...cfg, eta: 10 });
    const b0 = 0.2 * Math.sqrt(0.5 + 1e-8) / Math.sqrt(2 + 1e-8);
    close(r.advantages, [
      [-0.5 + b0, -0.5 - b0], [0.5 + b0, 0.5 - b0],
      [-0.3, -0.7], [0.7, 0.3], [-0.3, -0.7], [0.7, 0.3], [-0.3, -0.7], [0.7, 0.3],
    ], 'adrs lower median');
    assert.equal(lowerMedian([4, 1, 3, 2]), 2);
    assert.equal(lowerMedian([3, 1, 2]), 2);
    assert.equal(groupSpread([5, 5, 5]), 0, 'equal returns: no spread');
    assert.equal(groupSpread([1, 3]), Math.sqrt(2 + 1e-8));
  });

  test('spread and TVA read the penalised row score: one episode\'s invalid turn spreads a group', () => {
    // Both rows come from the same won episode (R = 10); the second turn was invalid (score 9.9).
    const s = [
      { groupId: 'g', score: 10, responseIds: ids(2) },
      { groupId: 'g', score: 9.9, responseIds: ids(2) },
    ];
    const r = adrsAdvantages(s, Float64Array.from([0.7, -0.7]), f32([[-1, -2], [-2, -1]]), 21, cfg);
    assert.equal(r.metrics['adrs/groups_with_spread'], 1);
    assert.ok(r.advantages.some((row, i) => row.some((v) => v !== [0.7, -0.7][i])), 'the bonus was applied');
  });

  test('a TVA side with an empty sum (α saturated at 1) gives TVA 0 rather than NaN', () => {
    // τ̄ = −1, −1, −100, −102; batch mean −51: g1's α = σ(50) = 1 exactly, so Σ(1−α) = 0.
    const s = [
      { groupId: 'g1', score: 1, responseIds: ids(2) },
      { groupId: 'g1', score: 0, responseIds: ids(2) },
      { groupId: 'g2', score: 0, responseIds: ids(2) },
      { groupId: 'g2', score: 1, responseIds: ids(2) },
    ];
    const r = adrsAdvantages(s, Float64Array.from([1, -1, -1, 1]), f32([[-0.5, -1.5], [-1, -1], [-99, -101], [-102, -102]]), 21, cfg);
    const a2 = sig(-49);
    const a3 = sig(-51);
    const tva2 = (a2 * 0 + a3 * 1) / (a2 + a3) - ((1 - a2) * 0 + (1 - a3) * 1) / ((1 - a2) + (1 - a3));
    assertClose([r.metrics['adrs/tva_mean'], r.metrics['adrs/gate_mean']], [tva2 / 2, (0.5 + sig(2 * tva2)) / 2], { atol: 1e-12 });
    for (const row of r.advantages) for (const v of row) assert.ok(Number.isFinite(v));
  });

  test('bad teacher log-probs are refused', () => {
    assert.throws(() => adrsAdvantages(samples, adv, f32([[-1, -2, -3], [NaN, -1.5], [-2, -2]]), 21, cfg),
      /adrsAdvantages: sample 1: teacher log-probs\[0\] is NaN/);
    assert.throws(() => adrsAdvantages(samples, adv, f32([[-1, -2, -3], [-0.5, -1.5], [-2]]), 21, cfg),
      /adrsAdvantages: sample 2: 1 teacher log-probs for 2 response tokens/);
  });
});

describe('GiGPO', () => {
  const cfg = DEFAULTS.gigpo;

  test('the schema defaults: step weight 1, γ 0.95', () => {
    assert.deepEqual(cfg, { stepWeight: 1, gamma: 0.95 });
  });

  // Group g: a (R = 10, 3 turns, states s0 s1 s2), b (R = 0, turns s0 s1), c (R = 10,
  // one turn on s0). Group h: d (R = 10) also on s0, which must not join g's step group.
  const step = (groupId: string, trajectoryId: string, turn: number, episodeReturn: number, state: string, n = 2, score = episodeReturn) =>
    ({ groupId, trajectoryId, turn, episodeReturn, score, state, responseIds: ids(n) });
  const samples = [
    step('g', 'a', 2, 10, 's2'), step('g', 'b', 0, 0, 's0', 3), step('g', 'a', 0, 10, 's0'), step('g', 'a', 1, 10, 's1', 1),
    step('g', 'b', 1, 0, 's1'), step('g', 'c', 0, 10, 's0'), step('h', 'd', 0, 10, 's0'),
  ];
  const adv = Float64Array.from([0.5, -1, 0.5, 0.5, -1, 0.7, 0]);
  // Step returns: a: 0.95²·10, 0.95·10, 10; b: 0, 0; c: 10; d: 10.
  // s0 in g: [9.025, 0, 10] (samples 2, 1, 5), mean 19.025/3.
  const mean0 = 19.025 / 3;
  const std0 = Math.sqrt(((9.025 - mean0) ** 2 + (0 - mean0) ** 2 + (10 - mean0) ** 2) / 2);
  // s1 in g: [9.5, 0] (samples 3, 4): ±4.75 / (√(2·4.75²) + 1e-6).
  const z1 = 4.75 / (Math.sqrt(2 * 4.75 * 4.75) + 1e-6);
  const stepAdv = [0, (0 - mean0) / (std0 + 1e-6), (9.025 - mean0) / (std0 + 1e-6), z1, -z1, (10 - mean0) / (std0 + 1e-6), 0];

  test('step groups of identical states within a task group; singletons get A_step = 0', () => {
    for (const w of [1, 0.5]) {
      const r = gigpoAdvantages(samples, adv, { ...cfg, stepWeight: w });
      close(r.advantages, samples.map((s, i) => new Array<number>(s.responseIds.length).fill(adv[i] + w * stepAdv[i])), `gigpo w=${w}`);
      assert.equal(r.metrics['gigpo/shared_step_frac'], 5 / 7);
      assert.equal(r.metrics['gigpo/step_group_size'], 7 / 4);
    }
  });

  test('a turn\'s invalid-action penalty comes off its step return after discounting', () => {
    // a's first turn (state s0) was invalid: score 10 − 0.1, step return 0.95²·10 − 0.1.
    const penalised = samples.map((s, i) => (i === 2 ? { ...s, score: 9.9 } : s));
    const r0 = [9.025 - 0.1, 0, 10];
    const m = (r0[0] + r0[1] + r0[2]) / 3;
    const sd = Math.sqrt(r0.reduce((a, v) => a + (v - m) ** 2, 0) / 2);
    const z = (v: number) => (v - m) / (sd + 1e-6);
    const expected = [0, z(0), z(9.025 - 0.1), z1, -z1, z(10), 0];
    const r = gigpoAdvantages(penalised, adv, cfg);
    close(r.advantages, samples.map((s, i) => new Array<number>(s.responseIds.length).fill(adv[i] + expected[i])), 'gigpo penalised');
  });

  test('without shared states the advantage is the episode one', () => {
    const distinct = samples.map((s, i) => ({ ...s, state: `state ${i}` }));
    const r = gigpoAdvantages(distinct, adv, cfg);
    close(r.advantages, samples.map((s, i) => new Array<number>(s.responseIds.length).fill(adv[i])), 'gigpo distinct');
    assert.equal(r.metrics['gigpo/shared_step_frac'], 0);
    assert.equal(r.metrics['gigpo/step_group_size'], 1);
  });

  test('bad inputs are refused', () => {
    assert.throws(() => gigpoAdvantages(samples, adv.subarray(0, 6), cfg), /gigpoAdvantages: 6 advantages for 7 samples/);
    const dup = samples.map((s, i) => (i === 3 ? { ...s, turn: 0 } : s));
    assert.throws(() => gigpoAdvantages(dup, adv, cfg), /gigpoAdvantages: sample \d: trajectory "a" has turns 0, 0, 2/);
  });
});

describe('Dr. GRPO', () => {
  test('A = score − group mean with no standard-deviation division; a group of one keeps its score', () => {
    const samples = [
      { groupId: 'g', score: 10, responseIds: ids(2) },
      { groupId: 'h', score: 10, responseIds: ids(1) },
      { groupId: 'g', score: 0, responseIds: ids(3) },
      { groupId: 'g', score: 9.9, responseIds: ids(1) },
    ];
    const plan = drGrpo.plan!({ iteration: 1, options: {}, entropyCoef: 0, env: { name: 'household', successReturn: 10 }, state: null });
    assert.deepEqual([plan.teacher, plan.policyGradient, plan.skills], [false, true, 'none']);
    const mean = 19.9 / 3;
    const r = plan.transform!({ samples: samples as never, advantages: new Float64Array(4), teacher: null, old: [] });
    close(r.advantages, [[10 - mean, 10 - mean], [10], [-mean, -mean, -mean], [9.9 - mean]], 'dr_grpo');
  });
});

describe('GPU path', () => {
  test('RLSD\'s per-token advantages through the policy loss: at ratio 1 the pg loss is −mean_t(Â)', async () => {
    await gpu();
    const samples = [{ responseIds: ids(3) }, { responseIds: ids(2) }];
    const old = f32([[-1.125, -1, -1.5], [-1.125, -1.5]]);
    const { advantages } = rlsdAdvantages(samples, Float64Array.from([2, -1]), f32([[-1, -0.5, -2], [-1, -2]]), old, 0.5, DEFAULTS.rlsd);
    // The same tokens as the RLSD test: Â worked out there.
    const hand = [2 * (0.5 + 0.5 * Math.exp(0.125)), 2.2, 1.8, -1 * (0.5 + 0.5 * Math.exp(-0.125)), -1.1];
    const flat = Float32Array.from(advantages.flatMap((a) => [...a]));
    const lold = Float32Array.from(old.flatMap((a) => [...a]));
    await scopeAsync(async () => {
      const t = policyLoss({
        logprobs: tensor(lold), oldLogprobs: tensor(lold), advantages: tensor(flat),
        negativeMask: tensor(Array.from(flat, (a) => (a < 0 ? 1 : 0))), weights: tensor(new Array(5).fill(1 / 5)),
      }, { ...DEFAULT_POLICY_LOSS, klCoef: 0, entropyCoef: 0 });
      assertClose(await read(t.pg), [-(hand[0] + hand[1] + hand[2] + hand[3] + hand[4]) / 5], { atol: 1e-6, label: 'pg' });
      assertClose(await read(t.loss), [-(hand[0] + hand[1] + hand[2] + hand[3] + hand[4]) / 5], { atol: 1e-6, label: 'loss' });
    });
  });
});
