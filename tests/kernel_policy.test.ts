// The runtime's kernel policy (src/gpu/kernel_policy.ts): defaults, checked changes,
// and changes undone.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { applyPolicy, kernelPolicy, TRAINING_FORWARD, withPolicy, type KernelPolicyChanges } from '../src/gpu/kernel_policy.ts';

describe('kernel policy', () => {
  test('each policy is its own: changing one leaves the defaults and other policies alone', () => {
    const a = kernelPolicy({ attention: { path: 'blocked' }, matmul: { originLayouts: ['nn', 'nt'] } });
    const b = kernelPolicy();
    assert.equal(a.attention.path, 'blocked');
    assert.equal(b.attention.path, 'auto');
    a.matmul.wideLayouts.push('tt');
    assert.deepEqual(b.matmul.wideLayouts, ['nn']);
    assert.deepEqual(kernelPolicy().matmul.originLayouts, ['nn']);
  });

  test('applyPolicy returns what it replaced, and applying that puts the policy back', () => {
    const policy = kernelPolicy();
    const before = structuredClone(policy);
    const undo = applyPolicy(policy, { tensorCores: { enabled: false, minMacs: 0 }, decode: { fused: 'never' } });
    assert.deepEqual(undo, { tensorCores: { enabled: true, minMacs: 2 ** 30 }, decode: { fused: 'auto' } });
    assert.equal(policy.tensorCores.enabled, false);
    applyPolicy(policy, undo);
    assert.deepEqual(policy, before);
  });

  test('withPolicy: the changes hold inside its body only, also when the body throws; a body that returns a promise is refused', () => {
    const policy = kernelPolicy();
    assert.equal(policy.attention.tensorForward, true, 'on by default');
    assert.equal(withPolicy(policy, TRAINING_FORWARD, () => policy.attention.trainingForward), true);
    assert.equal(policy.attention.trainingForward, false);
    assert.throws(() => withPolicy(policy, TRAINING_FORWARD, () => {
      throw new Error('boom');
    }), /boom/);
    assert.equal(policy.attention.trainingForward, false);
    assert.throws(() => withPolicy(policy, TRAINING_FORWARD, async () => 1), /withPolicy: the body must record its work synchronously/);
    assert.equal(policy.attention.trainingForward, false);
  });

  test('unknown sections and fields and values of the wrong type are refused, naming them', () => {
    assert.throws(() => kernelPolicy({ matmull: {} } as unknown as KernelPolicyChanges), /kernel policy: no section "matmull" \(have matmul, tensorCores, /);
    assert.throws(() => kernelPolicy({ reduce: { minSpans: 3 } } as unknown as KernelPolicyChanges), /kernel policy: reduce has no field "minSpans" \(have minWorkgroups, targetWorkgroups, minSpan\)/);
    assert.throws(() => kernelPolicy({ tensorCores: { enabled: 'yes' } } as unknown as KernelPolicyChanges), /kernel policy: tensorCores.enabled must be a boolean, got "yes"/);
    assert.throws(() => kernelPolicy({ matmul: { wideLayouts: 'nn' } } as unknown as KernelPolicyChanges), /kernel policy: matmul.wideLayouts must be an array, got "nn"/);
  });
});
