// The rollout correction (docs/ALGORITHMS.md section 1.9): the engine-trainer ratio
// ρ = π_old / π_rollout weighs each token's policy-gradient loss. Expected weights,
// shares and losses are worked out by hand from the section's formulas; with equal
// log-probs every mode must leave the loss and the update exactly as they are without
// it, and turns whose engine reported no log-probs are refused, not trained uncorrected.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { envPlugin } from '../envs/registry.ts';
import { HouseholdEnvironment } from '../envs/household/index.ts';
import { DEFAULT_POLICY_LOSS, policyLoss, type TokenInputs } from '../src/algos/policy_loss.ts';
import {
  checkRolloutLogprobs, correctionWeights, ROLLOUT_CORRECTION_MODES, rolloutCorrectionMetrics, type RolloutCorrection,
} from '../src/algos/rollout_correction.ts';
import { loadConfig } from '../src/config/config.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { loadModel } from '../src/models/load.ts';
import { AdamW } from '../src/optim/adamw.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { turnSequences } from '../src/rollout/turn_sequences.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { trainingIteration } from '../src/trainer/iteration.ts';
import { broadcastAdvantages, policyUpdate, responseLogprobs, splitMicroBatches, updateMiniBatches, type UpdateMetrics } from '../src/trainer/update.ts';
import { assertClose, gpu, read } from './support/gpu.ts';
import { lazyTinyHouseholdModel } from './support/tiny_household.ts';

const slow = { timeout: 600_000 };
const root = mkdtempSync(join(tmpdir(), 'wgt-correction-'));
after(() => rmSync(root, { recursive: true, force: true }));
const tinyModel = lazyTinyHouseholdModel(root);

/** The modes that weigh tokens (bypass replaces lold instead: its own tests below). */
const MODES = ROLLOUT_CORRECTION_MODES.filter((m) => m !== 'off' && m !== 'bypass');
const at = (mode: RolloutCorrection['mode'], cap = 2): RolloutCorrection => ({ mode, cap });

/** lold as the trainer holds it (float32) and the engine's log-probs, so that π_old/π_rollout = ρ per token. */
function logprobsFor(ratios: readonly number[], pRollout = 0.3): { old: Float32Array; rollout: number[] } {
  const old = Float32Array.from(ratios, (r) => Math.log(pRollout * r));
  return { old, rollout: ratios.map(() => Math.log(pRollout)) };
}

function sampleWith(responseLogprobs: number[], n = responseLogprobs.length, trajectoryId = 'g/0'): StepSample {
  return {
    groupId: 'g', trajectoryId, turn: 0, taskType: 't', promptIds: [1], responseIds: Array.from({ length: n }, (_, i) => 10 + i),
    responseLogprobs, valid: true, score: 0, episodeReturn: 0, won: false, state: '',
  };
}

describe('rollout correction weights, by hand', () => {
  // Two turns: ratios 3, 1, 0.6, 0.25 (product 0.45) and 1.8, 1.25 (product 2.25).
  const turnA = logprobsFor([3, 1, 0.6, 0.25]);
  const turnB = logprobsFor([1.8, 1.25]);

  test('tis truncates each token\'s ratio at C; mask keeps ρ inside [1/C, C] and zeroes the rest', () => {
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('tis')), [2, 1, 0.6, 0.25], { atol: 1e-6, label: 'tis, C = 2' });
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('tis', 4)), [3, 1, 0.6, 0.25], { atol: 1e-6, label: 'tis, C = 4' });
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('mask')), [0, 1, 0.6, 0], { atol: 1e-6, label: 'mask, C = 2' });
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('mask', 5)), [3, 1, 0.6, 0.25], { atol: 1e-6, label: 'mask, C = 5' });
  });

  test('the sequence modes weigh every token of a turn by the product of its ratios', () => {
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('seq-tis')), [0.45, 0.45, 0.45, 0.45], { atol: 1e-6, label: 'seq-tis A' });
    assertClose(correctionWeights(turnB.old, turnB.rollout, at('seq-tis')), [2, 2], { atol: 1e-6, label: 'seq-tis B' });
    // C = 2: 0.45 < 1/2 and 2.25 > 2, both out; C = 3: both inside [1/3, 3].
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('seq-mask')), [0, 0, 0, 0], { atol: 0, label: 'seq-mask A, C = 2' });
    assertClose(correctionWeights(turnB.old, turnB.rollout, at('seq-mask')), [0, 0], { atol: 0, label: 'seq-mask B, C = 2' });
    assertClose(correctionWeights(turnA.old, turnA.rollout, at('seq-mask', 3)), [0.45, 0.45, 0.45, 0.45], { atol: 1e-6, label: 'seq-mask A, C = 3' });
    assertClose(correctionWeights(turnB.old, turnB.rollout, at('seq-mask', 3)), [2.25, 2.25], { atol: 1e-6, label: 'seq-mask B, C = 3' });
  });

  test('a log-ratio beyond ±20 is bounded before exp: a long turn\'s product stays finite', () => {
    const old = new Float32Array(30).fill(-1);
    const rollout = Array.from({ length: 30 }, () => -2);
    assertClose(correctionWeights(old, rollout, at('seq-tis', 1e12)), new Float32Array(30).fill(Math.exp(20)), { rtol: 1e-6, label: 'exp(20)' });
  });

  test('equal log-probs weigh every token exactly 1 in every mode', () => {
    const old = Float32Array.of(-0.1, -2.5, -7, -0.001);
    for (const mode of MODES) assert.deepEqual([...correctionWeights(old, Array.from(old), at(mode))], [1, 1, 1, 1], mode);
  });

  test('metrics: the ratio\'s mean, min and max per token or per turn, the share cut, and the k3 KL', () => {
    const samples = [sampleWith(turnA.rollout), sampleWith(turnB.rollout, 2, 'g/1')];
    const old = [turnA.old, turnB.old];
    const ratios = [3, 1, 0.6, 0.25, 1.8, 1.25];
    const kl = ratios.reduce((s, r) => s + r - 1 - Math.log(r), 0) / 6;
    const tis = rolloutCorrectionMetrics(samples, old, at('tis'));
    assertClose(
      [tis['rollout/is_ratio_mean'], tis['rollout/is_ratio_min'], tis['rollout/is_ratio_max'], tis['rollout/is_truncated_share'], tis['rollout/mismatch_kl']],
      [7.9 / 6, 0.25, 3, 1 / 6, kl], { atol: 1e-6, label: 'tis' },
    );
    const mask = rolloutCorrectionMetrics(samples, old, at('mask'));
    assertClose([mask['rollout/is_masked_share']], [2 / 6], { atol: 0, label: 'mask: 3 and 0.25 outside [0.5, 2]' });
    assert.equal(mask['rollout/is_truncated_share'], undefined);
    const seq = rolloutCorrectionMetrics(samples, old, at('seq-mask'));
    assertClose(
      [seq['rollout/is_ratio_mean'], seq['rollout/is_ratio_min'], seq['rollout/is_ratio_max'], seq['rollout/is_masked_share'], seq['rollout/mismatch_kl']],
      [1.35, 0.45, 2.25, 1, kl], { atol: 1e-6, label: 'seq-mask, C = 2' },
    );
    assert.equal(rolloutCorrectionMetrics(samples, old, at('seq-mask', 3))['rollout/is_masked_share'], 0);
    assert.equal(rolloutCorrectionMetrics(samples, old, at('seq-tis'))['rollout/is_truncated_share'], 0.5);
    // Off (or no correction given) still measures the mismatch, per token, and cuts nothing.
    const off = rolloutCorrectionMetrics(samples, old, undefined);
    assertClose([off['rollout/is_ratio_mean'], off['rollout/mismatch_kl']], [7.9 / 6, kl], { atol: 1e-6, label: 'off' });
    assert.deepEqual(Object.keys(off).filter((k) => k.endsWith('_share')), []);
  });

  test('a turn without the engine\'s log-probs is refused while a correction is on, and left out of the metrics', () => {
    const samples = [sampleWith(turnA.rollout), sampleWith([], 3, 'g/7')];
    for (const mode of MODES) {
      assert.throws(() => checkRolloutLogprobs(samples, at(mode)), /algorithm\.rolloutCorrection\.mode is [a-z-]+.* 1 of the iteration's 2 turns came without them \(first: trajectory g\/7, turn 0, 3 tokens and 0 log-probs\).*mode=off/);
    }
    checkRolloutLogprobs(samples, at('off'));
    checkRolloutLogprobs(samples, undefined);
    const m = rolloutCorrectionMetrics(samples, [turnA.old, new Float32Array(3)], at('tis'));
    assertClose([m['rollout/is_ratio_mean']], [4.85 / 4], { atol: 1e-6, label: 'only the turn with log-probs' });
  });
});

describe('the correction in the policy loss', () => {
  // lθ − lold gives the PPO ratios 1.5, 0.5, 5, 1 with A = 1, −1, −1, 2: token losses −1.2, 0.8, 3, −2 (tests/grpo.test.ts).
  const A = [1, -1, -1, 2];
  const r = [1.5, 0.5, 5, 1];
  const { old, rollout } = logprobsFor([3, 1, 0.6, 0.25]);
  const inputs = (l: number[] | Float32Array, weights?: Float32Array): TokenInputs => ({
    logprobs: requireGrad(tensor(Float32Array.from(l))), oldLogprobs: tensor(old), refLogprobs: tensor(old),
    advantages: tensor(A), negativeMask: tensor(A.map((a) => (a < 0 ? 1 : 0))), weights: tensor([0.25, 0.25, 0.25, 0.25]),
    entropy: tensor([1, 2, 3, 4]),
    ...(weights ? { correctionWeights: tensor(weights) } : {}),
  });
  const lossAndGrad = (l: number[] | Float32Array, weights?: Float32Array) => scopeAsync(async () => {
    const x = inputs(l, weights);
    const t = policyLoss(x, DEFAULT_POLICY_LOSS);
    backward(t.loss);
    return { pg: (await read(t.pg))[0], loss: (await read(t.loss))[0], grad: await read(x.logprobs.grad!) };
  });

  test('equal log-probs: every mode gives the loss and its gradient bit for bit as without the correction', async () => {
    await gpu();
    const l = Array.from(old, (o, i) => o + Math.log(r[i]));
    const plain = await lossAndGrad(l);
    for (const mode of MODES) {
      const same = await lossAndGrad(l, correctionWeights(old, Array.from(old), at(mode)));
      assert.deepEqual(same, plain, mode);
    }
  });

  test('tis weights only the policy-gradient term: pg and each token\'s gradient from it scale by w = 2, 1, 0.6, 0.25', async () => {
    await gpu();
    const l = Array.from(old, (o, i) => o + Math.log(r[i]));
    const w = correctionWeights(old, rollout, at('tis'));
    // Without KL and entropy the gradient is the pg term's alone, so it scales token by token.
    const pgOnly = { ...DEFAULT_POLICY_LOSS, klCoef: 0, entropyCoef: 0 };
    const run = (weights?: Float32Array) => scopeAsync(async () => {
      const x = inputs(l, weights);
      const t = policyLoss(x, pgOnly);
      backward(t.loss);
      return { pg: (await read(t.pg))[0], grad: await read(x.logprobs.grad!) };
    });
    const plain = await run();
    const weighted = await run(w);
    assertClose([weighted.pg], [(-1.2 * 2 + 0.8 * 1 + 3 * 0.6 - 2 * 0.25) / 4], { atol: 1e-6, label: 'pg' });
    assertClose(weighted.grad, Array.from(plain.grad, (g, i) => g * w[i]), { atol: 1e-7, label: 'gradient' });
    // The KL and entropy terms take no weight: the full losses differ by the pg terms alone.
    const full = await lossAndGrad(l);
    const fullWeighted = await lossAndGrad(l, w);
    assertClose([fullWeighted.loss - full.loss], [weighted.pg - plain.pg], { atol: 1e-6, label: 'only pg moves' });
  });
});

describe('the correction through the update', () => {
  /** Two samples of one group: 3 response tokens with A = +1, then 1 token with A = -1 (tests/update.test.ts). */
  function samples(rollout?: readonly ArrayLike<number>[]): StepSample[] {
    const base = { groupId: 'g', turn: 0, taskType: 't', valid: true, episodeReturn: 0, won: false, state: '' };
    return [
      { ...base, trajectoryId: 'g/0', promptIds: [300, 301, 302, 303, 304, 305], responseIds: [310, 311, 312], responseLogprobs: rollout ? Array.from(rollout[0]) : [0, 0, 0], score: 1 },
      { ...base, trajectoryId: 'g/1', promptIds: [320, 321, 322, 323], responseIds: [330], responseLogprobs: rollout ? Array.from(rollout[1]) : [0], score: -1 },
    ];
  }

  /**
   * One AdamW step over both samples as one mini-batch of two micro-batches, lold from a
   * separate pass or from the step's own forward, the engine's log-probs `rollout`.
   */
  async function step(
    dir: string,
    o: { correction?: RolloutCorrection; rollout?: readonly ArrayLike<number>[]; advantages?: Float32Array[]; ownOld?: boolean; engineOld?: boolean; firstForward?: boolean },
  ): Promise<{ metrics: UpdateMetrics; weights: Float32Array[]; old: Float32Array[]; firstForward?: Float32Array[] }> {
    const model = loadModel(dir, { trainable: true });
    let optimizer: AdamW | null = null;
    try {
      const s = samples(o.rollout);
      const seqs = turnSequences(s, { merge: true });
      const old = o.engineOld
        ? s.map((x) => Float32Array.from(x.responseLogprobs))
        : o.ownOld ? s.map(() => new Float32Array(0)) : await responseLogprobs(model, s, splitMicroBatches(seqs, seqs.map((_, i) => i), 1 << 16), 1, { asTraining: true });
      const firstForward = o.firstForward ? s.map(() => new Float32Array(0)) : undefined;
      const params = model.parameters();
      optimizer = new AdamW(params, { lr: 1e-3 });
      const ctx = {
        model, optimizer, params, lr: 1e-3,
        loss: { ...DEFAULT_POLICY_LOSS, klCoef: 0, entropyCoef: 0 }, gradClip: Infinity,
        miniBatchSize: s.length, microBatchTokens: 9, temperature: 1, shuffle: (n: number) => Array.from({ length: n }, (_, i) => i),
        ...(o.correction ? { correction: o.correction } : {}),
      };
      const advantages = o.advantages ?? broadcastAdvantages(s, Float64Array.of(1, -1));
      const metrics = await policyUpdate(ctx, s, seqs, updateMiniBatches(ctx, seqs), { advantages, oldLogprobs: old, oldFromFirstStep: o.ownOld, firstForward, refLogprobs: null });
      const weights = await Promise.all(params.map(async (p) => Float32Array.from(await p.toArray())));
      return { metrics, weights, old, firstForward };
    } finally {
      optimizer?.dispose();
      for (const p of model.parameters()) p.dispose();
    }
  }

  for (const ownOld of [false, true]) {
    const source = ownOld ? 'lold from the step\'s own forward' : 'lold from a separate pass';
    test(`${source}: equal log-probs leave the step bit for bit as it is uncorrected, in every mode`, slow, async () => {
      const dir = await tinyModel();
      const plain = await step(dir, { ownOld });
      for (const mode of MODES) {
        const same = await step(dir, { ownOld, correction: at(mode), rollout: plain.old });
        assert.deepEqual([same.metrics.pgLoss, same.metrics.gradNorm], [plain.metrics.pgLoss, plain.metrics.gradNorm], `${mode}: pg and gradient norm`);
        same.weights.forEach((w, i) => assert.deepEqual(w, plain.weights[i], `${mode}: parameter ${i}`));
        same.old.forEach((lp, i) => assert.deepEqual(lp, plain.old[i], `${mode}: old log-probs of sample ${i}`));
      }
    });

    test(`${source}: a known perturbation weighs the step as advantages A·w would`, slow, async () => {
      const dir = await tinyModel();
      const plain = await step(dir, { ownOld });
      // Token ratios ρ: 3, 1, 0.6 in the first turn (product 1.8), 0.25 in the second.
      const rho = [[3, 1, 0.6], [0.25]];
      const rollout = plain.old.map((lp, i) => Float64Array.from(lp, (x, j) => x - Math.log(rho[i][j])));
      const expected: Record<string, number[][]> = {
        tis: [[2, 1, 0.6], [0.25]],
        'seq-tis': [[1.8, 1.8, 1.8], [0.25]],
        mask: [[0, 1, 0.6], [0]],
        'seq-mask': [[1.8, 1.8, 1.8], [0]],
      };
      for (const mode of MODES) {
        const w = expected[mode];
        const corrected = await step(dir, { ownOld, correction: at(mode), rollout });
        // The first step's ratio is 1, so each token's loss is −A·w: pg = −(Σ w of the A = +1 tokens − w of the A = −1 token) / 4.
        assertClose([corrected.metrics.pgLoss], [-(w[0][0] + w[0][1] + w[0][2] - w[1][0]) / 4], { atol: 1e-5, label: `${mode}: pg` });
        const reweighted = await step(dir, { ownOld, advantages: [Float32Array.from(w[0]), Float32Array.from(w[1], (x) => -x)] });
        corrected.weights.forEach((p, i) => assertClose(p, reweighted.weights[i], { atol: 1e-6, rtol: 1e-5, label: `${mode}: parameter ${i}` }));
      }
    });
  }

  test('bypass: lold is the engine\'s, the step that of those values given as lold, and the first step\'s forward comes back as its own lold would', slow, async () => {
    const dir = await tinyModel();
    const own = await step(dir, { ownOld: true });
    // The engine's log-probs a known perturbation away from the trainer's: ratios 1.5, 1, 0.8 and 0.5.
    const rollout = own.old.map((lp, i) => Float64Array.from(lp, (x, j) => x - Math.log([[1.5, 1, 0.8], [0.5]][i][j])));
    const bypass = await step(dir, { engineOld: true, firstForward: true, rollout, correction: at('bypass') });
    const given = await step(dir, { engineOld: true, rollout });
    bypass.weights.forEach((w, i) => assert.deepEqual(w, given.weights[i], `parameter ${i}`));
    assert.deepEqual(bypass.old, rollout.map((x) => Float32Array.from(x)), 'lold stays the engine\'s');
    bypass.firstForward!.forEach((lp, i) => assert.deepEqual(lp, own.old[i], `the first step's forward of sample ${i}`));
    assert.ok(bypass.weights.some((w, i) => w.some((x, j) => x !== own.weights[i][j])), 'a first ratio other than 1 moves the step');
  });
});

describe('bypass: the engine\'s log-probs are the old policy\'s', () => {
  test('an iteration runs no old log-prob pass and measures the mismatch on the first step\'s samples; without the engine\'s log-probs it stops before training', slow, async () => {
    const dir = await tinyModel();
    const tokenizer = await loadTokenizer(dir);
    const spec = envPlugin('household').agent;
    const iterate = async (engine: 'local' | 'expert') => {
      const model = loadModel(dir, { trainable: true });
      const params = model.parameters();
      const optimizer = new AdamW(params, { lr: 1e-3 });
      try {
        return await trainingIteration({
          rollout: {
            env: new HouseholdEnvironment(), spec, engine: engine === 'local' ? new LocalEngine(model, { tokenizer }) : new ExpertEngine(tokenizer, spec), tokenizer,
            tasks: [{ split: 'train', seed: 3 }], groupSize: 2, maxTurns: 2, maxPromptTokens: 1900, maxResponseTokens: 8,
            sampling: { temperature: 1, seed: 5 }, history: 'window', withSkills: 'none', invalidPenalty: 0.1, groupIdPrefix: 'it1-',
          },
          update: {
            model, optimizer, params, lr: 1e-3,
            loss: { ...DEFAULT_POLICY_LOSS, klCoef: 0 }, gradClip: 1, miniBatchSize: 2, microBatchTokens: 4096, temperature: 1,
            shuffle: (n) => Array.from({ length: n }, (_, i) => i), correction: at('bypass'),
          },
          mergeTurns: false,
          reference: { kind: 'none' },
          plan: { skills: 'none', teacher: false, policyGradient: true, entropyCoef: 0, transform: null, aux: null, metrics: {} },
        }).then((result) => ({ result, error: null }), (error: Error) => ({ result: null, error }));
      } finally {
        optimizer.dispose();
        for (const p of params) p.dispose();
      }
    };
    const { result, error } = await iterate('local');
    assert.equal(error, null);
    const m = result!.metrics;
    assert.equal(m['tokens/old_scored_sequences'], 0);
    assert.equal(m['gpu/old_logprobs_dispatches'], 0, 'no pass scored lold');
    assert.ok(result!.update!.steps >= 2, 'more than one mini-batch, so the later ones train on the engine\'s lold too');
    // The local engine decodes from the trainer's own weights: the ratio of what the first step saw is about 1.
    assert.ok(Math.abs(m['rollout/is_ratio_mean'] - 1) < 1e-3 && m['rollout/mismatch_kl'] < 1e-4, `ratio ${m['rollout/is_ratio_mean']}, kl ${m['rollout/mismatch_kl']}`);
    assert.equal(m['rollout/is_masked_share'] ?? m['rollout/is_truncated_share'], undefined, 'bypass weighs no token');
    const expert = await iterate('expert');
    assert.match(String(expert.error), /algorithm\.rolloutCorrection\.mode is bypass, which takes the rollout engine's own log-probs as the old policy's, but (\d+) of the iteration's \1 turns came without them/);
  });

  test('the configuration takes mode bypass, and refuses a cap where no token is weighed', () => {
    assert.equal(loadConfig(undefined, ['algorithm.rolloutCorrection.mode=bypass']).algorithm.rolloutCorrection.mode, 'bypass');
    for (const mode of ['bypass', 'off']) {
      assert.throws(() => loadConfig(undefined, [`algorithm.rolloutCorrection.mode=${mode}`, 'algorithm.rolloutCorrection.cap=2']), /algorithm\.rolloutCorrection\.cap.*mode off and mode bypass weigh no token, so they take no cap/);
    }
  });
});

describe('an iteration whose engine reports no log-probs', () => {
  test('is refused before anything trains while a correction is on (the default), and trains with it off', slow, async () => {
    const dir = await tinyModel();
    const tokenizer = await loadTokenizer(dir);
    const spec = envPlugin('household').agent;
    /** One iteration of the household expert's episodes, and whether it moved the weights. */
    const iterate = async (correction: RolloutCorrection) => {
      const model = loadModel(dir, { trainable: true });
      const params = model.parameters();
      const optimizer = new AdamW(params, { lr: 1e-3 });
      try {
        const before = await Promise.all(params.map((p) => read(p)));
        const outcome = await trainingIteration({
          rollout: {
            env: new HouseholdEnvironment(), spec, engine: new ExpertEngine(tokenizer, spec), tokenizer,
            tasks: [{ split: 'train', seed: 3 }], groupSize: 2, maxTurns: 2, maxPromptTokens: 1900, maxResponseTokens: 64,
            sampling: { temperature: 1, seed: 5 }, history: 'window', withSkills: 'none', invalidPenalty: 0.1, groupIdPrefix: 'it1-',
          },
          update: {
            model, optimizer, params, lr: 1e-3,
            loss: { ...DEFAULT_POLICY_LOSS, klCoef: 0 }, gradClip: 1, miniBatchSize: 64, microBatchTokens: 4096, temperature: 1,
            shuffle: (n) => Array.from({ length: n }, (_, i) => i), correction,
          },
          mergeTurns: true,
          reference: { kind: 'none' },
          plan: { skills: 'none', teacher: false, policyGradient: true, entropyCoef: 0, transform: null, aux: null, metrics: {} },
        }).then((result) => ({ result, error: null }), (error: Error) => ({ result: null, error }));
        const afterwards = await Promise.all(params.map((p) => read(p)));
        return { ...outcome, moved: afterwards.some((p, i) => p.some((x, j) => x !== before[i][j])) };
      } finally {
        optimizer.dispose();
        for (const p of params) p.dispose();
      }
    };
    const on = await iterate(loadConfig(undefined, []).algorithm.rolloutCorrection);
    assert.match(String(on.error), /algorithm\.rolloutCorrection\.mode is seq-mask, which weighs each response token by the rollout engine's own log-prob of it, but (\d+) of the iteration's \1 turns came without them/);
    assert.equal(on.moved, false);
    const off = await iterate(at('off'));
    assert.equal(off.error, null);
    assert.equal(off.result!.update!.steps, 1);
    assert.equal(off.moved, true);
    assert.equal(off.result!.metrics['rollout/is_ratio_mean'], undefined, 'nothing to measure without the engine\'s log-probs');
  });
});
