// GRPO's advantage and token loss on hand-made inputs; expected values are worked
// out from the formulas in the shared design (ALGORITHMS.md section 1), not from the code.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { groupAdvantages } from '../src/algos/advantage.ts';
import { rolloutProbsDiff } from '../src/trainer/iteration.ts';
import { statsRow } from '../src/trainer/update.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { DEFAULT_POLICY_LOSS, policyLoss } from '../src/algos/policy_loss.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

describe('GRPO', () => {
  test('advantages standardise scores within each group (unbiased std); singletons get mean 0, std 1', () => {
    const a = groupAdvantages([
      { groupId: 'g1', score: 10 }, { groupId: 'g2', score: 0.5 }, { groupId: 'g1', score: 10 },
      { groupId: 'g1', score: 0 }, { groupId: 'g1', score: -0.1 },
    ]);
    // g1: mean 4.975, deviations 5.025, 5.025, -4.975, -5.075; sum of squares 101.0075; var 33.669166...
    const std = Math.sqrt(101.0075 / 3);
    assertClose(a, [5.025 / (std + 1e-6), 0.5 / (1 + 1e-6), 5.025 / (std + 1e-6), -4.975 / (std + 1e-6), -5.075 / (std + 1e-6)], { atol: 1e-12, rtol: 1e-12 });
    assert.deepEqual([...groupAdvantages([{ groupId: 'x', score: 3 }, { groupId: 'x', score: 3 }])], [0, 0]);
  });

  test('dual-clip PPO + k3 KL + entropy bonus on four tokens', async () => {
    await gpu();
    await scopeAsync(async () => {
      // r = 1.5 (A=1), 0.5 (A=-1), 5 (A=-1), 1 (A=2); lold = 0, lref = 0.
      const l = [Math.log(1.5), Math.log(0.5), Math.log(5), 0];
      const A = [1, -1, -1, 2];
      const t = policyLoss({
        logprobs: tensor(l), oldLogprobs: tensor([0, 0, 0, 0]), refLogprobs: tensor([0, 0, 0, 0]),
        advantages: tensor(A), negativeMask: tensor(A.map((a) => (a < 0 ? 1 : 0))), weights: tensor([0.25, 0.25, 0.25, 0.25]),
        entropy: tensor([1, 2, 3, 4]),
      }, DEFAULT_POLICY_LOSS);
      // token losses: max(-1.5, -1.2) = -1.2; max(0.5, 0.8) = 0.8; min(max(5, 1.2), 3) = 3; -2
      assertClose(await read(t.pg), [0.15], { atol: 1e-6, label: 'pg' });
      // k3 = e^-l + l - 1 per token
      const kl = (1 / 1.5 + Math.log(1.5) - 1 + 2 + Math.log(0.5) - 1 + 0.2 + Math.log(5) - 1) / 4;
      assertClose(await read(t.kl!), [kl], { atol: 1e-6, label: 'kl' });
      assertClose(await read(t.entropy!), [2.5], { atol: 1e-6, label: 'entropy' });
      assertClose(await read(t.loss), [0.15 + 0.01 * kl - 0.001 * 2.5], { atol: 1e-6, label: 'loss' });
      // OPSD switches the policy-gradient term off; KL and entropy stay, pg is still reported.
      const off = policyLoss({
        logprobs: tensor(l), oldLogprobs: tensor([0, 0, 0, 0]), refLogprobs: tensor([0, 0, 0, 0]),
        advantages: tensor(A), negativeMask: tensor(A.map((a) => (a < 0 ? 1 : 0))), weights: tensor([0.25, 0.25, 0.25, 0.25]),
        entropy: tensor([1, 2, 3, 4]),
      }, { ...DEFAULT_POLICY_LOSS, policyGradient: false });
      assertClose(await read(off.pg), [0.15], { atol: 1e-6, label: 'pg without the term' });
      assertClose(await read(off.loss), [0.01 * kl - 0.001 * 2.5], { atol: 1e-6, label: 'loss without pg' });
    });
  });

  test('the loss gradient w.r.t. the log-probs passes finite differences', async () => {
    await gpu();
    const A = [0.7, -1.3, -0.4, 1.1, 0.3];
    await gradCheck(
      (l) => policyLoss({
        logprobs: l, oldLogprobs: tensor([0.1, -0.2, 0.05, 0, -0.1]), refLogprobs: tensor([0.2, 0.1, -0.3, 0.05, 0]),
        advantages: tensor(A), negativeMask: tensor(A.map((a) => (a < 0 ? 1 : 0))), weights: tensor([0.2, 0.2, 0.2, 0.2, 0.2]),
      }, DEFAULT_POLICY_LOSS).loss,
      [{ data: Float32Array.from([0.05, -0.1, 0.1, 0.02, -0.05]), shape: [5] }],
      { eps: 1e-3, label: 'policy loss' },
    );
  });

  test('rollout/probs_diff compares the engine\'s token probabilities with the recomputed ones', () => {
    const sample = (responseLogprobs: number[]) => ({ responseLogprobs }) as StepSample;
    const m = rolloutProbsDiff([sample([Math.log(0.5), Math.log(0.25)]), sample([0])], [Float32Array.of(Math.log(0.5), Math.log(0.5)), Float32Array.of(Math.log(0.9))]);
    assert.ok(Math.abs(m['rollout/probs_diff_mean'] - (0 + 0.25 + 0.1) / 3) < 1e-6);
    assert.ok(Math.abs(m['rollout/probs_diff_max'] - 0.25) < 1e-6);
    assert.deepEqual(rolloutProbsDiff([], []), {});
  });

  test('update statistics: the clip fraction counts response tokens strictly outside the clip range', async () => {
    await gpu();
    await scopeAsync(async () => {
      const ratio = tensor(Float32Array.of(0.5, 0.8, 1, 1.2, 1.3, 2, 0.1));
      // Five response tokens of a micro-batch whose mini-batch has ten: weights 1/10; the last two are padding.
      const weights = tensor(Float32Array.of(0.1, 0.1, 0.1, 0.1, 0.1, 0, 0));
      const row = await read(statsRow({ loss: tensor(Float32Array.of(0)), pg: tensor(Float32Array.of(0.25)), ratio }, weights, DEFAULT_POLICY_LOSS, [tensor(Float32Array.of(7))]));
      // Its share of the mini-batch's clip fraction: 2 of the mini-batch's 10 tokens.
      assertClose(row, Float32Array.of(0.25, 0, 0, 2 / 10, 7), { atol: 1e-6 });
    });
  });
});
