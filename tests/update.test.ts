// The policy update's aggregation: every response token of a mini-batch weighs
// 1/(its response tokens), so the loss is the mini-batch's token mean (as the
// reference takes it) and does not depend on how optim.microBatchTokens cuts the
// mini-batch into micro-batches.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { DEFAULT_POLICY_LOSS } from '../src/algos/policy_loss.ts';
import { loadModel } from '../src/models/load.ts';
import { AdamW } from '../src/optim/adamw.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { turnSequences } from '../src/rollout/turn_sequences.ts';
import { broadcastAdvantages, policyUpdate, responseLogprobs, splitMicroBatches, updateMiniBatches, type UpdateMetrics } from '../src/trainer/update.ts';
import { runtime } from '../src/gpu/runtime.ts';
import { assertClose } from './support/gpu.ts';
import { lazyTinyHouseholdModel } from './support/tiny_household.ts';

const slow = { timeout: 600_000 };
const root = mkdtempSync(join(tmpdir(), 'wgt-update-'));
after(() => rmSync(root, { recursive: true, force: true }));
const tinyModel = lazyTinyHouseholdModel(root);

/** Two samples of one group: 3 response tokens with A = +1, then 1 token with A = -1. */
function samples(): StepSample[] {
  const base = { groupId: 'g', turn: 0, taskType: 't', valid: true, episodeReturn: 0, won: false, state: '' };
  return [
    { ...base, trajectoryId: 'g/0', promptIds: [300, 301, 302, 303, 304, 305], responseIds: [310, 311, 312], responseLogprobs: [0, 0, 0], score: 1 },
    { ...base, trajectoryId: 'g/1', promptIds: [320, 321, 322, 323], responseIds: [330], responseLogprobs: [0], score: -1 },
  ];
}

/**
 * One AdamW step over both samples as one mini-batch cut by `microBatchTokens`, lold
 * scored at `oldTemperature` and the update at `temperature`; returns the metrics and
 * the updated weights.
 */
async function update(
  dir: string, microBatchTokens: number, temperature = 1, oldTemperature = temperature, { oldFromFirstStep = false } = {},
): Promise<{ metrics: UpdateMetrics; weights: Float32Array[]; microBatches: number; old: Float32Array[] }> {
  const model = loadModel(dir, { trainable: true });
  let optimizer: AdamW | null = null;
  try {
    const s = samples();
    const seqs = turnSequences(s, { merge: true });
    const all = seqs.map((_, i) => i);
    // lold = lθ before the step, so every ratio is 1 and the pg term is −mean_t(A).
    const old = oldFromFirstStep ? s.map(() => new Float32Array(0)) : await responseLogprobs(model, s, splitMicroBatches(seqs, all, 1 << 16), oldTemperature);
    const params = model.parameters();
    optimizer = new AdamW(params, { lr: 1e-3 });
    const ctx = {
      model, optimizer, params, lr: 1e-3,
      loss: { ...DEFAULT_POLICY_LOSS, klCoef: 0, entropyCoef: 0 }, gradClip: Infinity,
      miniBatchSize: s.length, microBatchTokens, temperature, shuffle: (n: number) => Array.from({ length: n }, (_, i) => i),
    };
    const metrics = await policyUpdate(
      ctx, s, seqs, updateMiniBatches(ctx, seqs),
      { advantages: broadcastAdvantages(s, Float64Array.of(1, -1)), oldLogprobs: old, oldFromFirstStep, refLogprobs: null },
    );
    const weights = await Promise.all(params.map(async (p) => Float32Array.from(await p.toArray())));
    return { metrics, weights, microBatches: splitMicroBatches(seqs, all, microBatchTokens).length, old };
  } finally {
    optimizer?.dispose();
    for (const p of model.parameters()) p.dispose();
  }
}

describe('policy update aggregation', () => {
  test('the loss is the token mean over the mini-batch, the same whether it runs as one micro-batch or two', slow, async () => {
    const dir = await tinyModel();
    const whole = await update(dir, 1 << 16);
    const cut = await update(dir, 9);
    assert.deepEqual([whole.microBatches, cut.microBatches], [1, 2]);
    // −(3·(+1) + 1·(−1)) / 4 tokens. A mean of the two micro-batches' own means would give −(1 − 1)/2 = 0.
    for (const r of [whole, cut]) {
      assertClose([r.metrics.pgLoss], [-0.5], { atol: 1e-5, label: 'pg' });
      assert.equal(r.metrics.trainedTokens, 4);
      assert.equal(r.metrics.clipFrac, 0);
    }
    assertClose([cut.metrics.gradNorm], [whole.metrics.gradNorm], { rtol: 1e-4, label: 'gradient norm' });
    whole.weights.forEach((w, i) => assertClose(cut.weights[i], w, { atol: 1e-6, rtol: 1e-4, label: `parameter ${i}` }));
  });

  test('the first mini-batch\'s old log-probs from its own forward: the same step as a separate old pass, and the values written back', slow, async () => {
    const dir = await tinyModel();
    for (const budget of [1 << 16, 9]) {
      const scored = await update(dir, budget);
      const own = await update(dir, budget, 1, 1, { oldFromFirstStep: true });
      assertClose([own.metrics.pgLoss], [-0.5], { atol: 1e-6, label: 'pg' });
      assert.equal(own.metrics.clipFrac, 0);
      assertClose([own.metrics.gradNorm], [scored.metrics.gradNorm], { rtol: 1e-4, label: 'gradient norm' });
      scored.weights.forEach((w, i) => assertClose(own.weights[i], w, { atol: 1e-6, rtol: 1e-4, label: `parameter ${i}` }));
      scored.old.forEach((lp, i) => {
        assert.equal(own.old[i].length, lp.length, `sample ${i} filled in`);
        assertClose(own.old[i], lp, { atol: 1e-5, label: `old log-probs of sample ${i}` });
      });
    }
  });

  test('lθ is scored at the rollout temperature, like lold: ratios start at 1 at T = 2, not when the two disagree', slow, async () => {
    const dir = await tinyModel();
    const same = await update(dir, 1 << 16, 2);
    assertClose([same.metrics.pgLoss], [-0.5], { atol: 1e-5, label: 'pg at T = 2' });
    // lold at T = 1 against lθ at T = 2: the ratios move off 1 and so does the pg term.
    const mixed = await update(dir, 1 << 16, 2, 1);
    assert.ok(Math.abs(mixed.metrics.pgLoss + 0.5) > 1e-3, `pg ${mixed.metrics.pgLoss} with lold at T = 1`);
  });

  test('old log-probs (asTraining) are recorded with the kernels the update takes; other scoring passes with the policy as it is', slow, async () => {
    const dir = await tinyModel();
    const rt = runtime();
    const model = loadModel(dir, { trainable: false });
    const seen: boolean[] = [];
    // The policy as each forward is recorded: the attention op chooses its kernel then.
    const spy = new Proxy(model, {
      get(target, key) {
        const value = Reflect.get(target, key);
        if (key !== 'hidden') return typeof value === 'function' ? value.bind(target) : value;
        return (...args: unknown[]) => {
          seen.push(rt.policy.attention.trainingForward);
          return value.apply(target, args);
        };
      },
    });
    try {
      const s = samples();
      const seqs = turnSequences(s, { merge: true });
      const batches = splitMicroBatches(seqs, seqs.map((_, i) => i), 9);
      const old = await responseLogprobs(spy, s, batches, 1, { asTraining: true });
      const scored = await responseLogprobs(spy, s, batches);
      assert.deepEqual(seen, [true, true, false, false], 'two micro-batches each');
      assert.equal(rt.policy.attention.trainingForward, false, 'put back');
      old.forEach((lp, i) => assertClose(lp, scored[i], { atol: 1e-6, label: `sample ${i}` }));
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });
});
