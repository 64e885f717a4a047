// The embedded default (`train` with no config file): its recipe, the order of the
// user's overrides after it, and the software-GPU scale-down.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../src/config/config.ts';
import { applySoftwareGpuScale, EMBEDDED_RECIPE, SOFTWARE_GPU_SCALE } from '../src/config/default_run.ts';

describe('the embedded default', () => {
  test('is GRPO on household from the bundled model, 150 iterations of 16 tasks x 8 with the bundled model\'s settings', () => {
    const cfg = loadConfig(undefined, [...EMBEDDED_RECIPE]);
    assert.equal(cfg.method, 'grpo');
    assert.equal(cfg.env.name, 'household');
    assert.equal(cfg.model.path, 'models/household-tiny');
    assert.deepEqual([cfg.iterations, cfg.rollout.tasksPerIteration, cfg.rollout.groupSize, cfg.rollout.maxBatch], [150, 16, 8, 512]);
    assert.equal(cfg.optim.lr, 1e-4);
    assert.equal(cfg.optim.miniBatchSize, 1024);
    assert.equal(cfg.optim.microBatchTokens, 32768);
    assert.equal(cfg.rollout.maxTurns, 20);
    assert.equal(cfg.rollout.maxResponseTokens, 64);
    assert.deepEqual([cfg.validation.tasks, cfg.validation.runs, cfg.validation.every], [128, 4, 10]);
  });

  test("the user's overrides come after the recipe and win", () => {
    const cfg = loadConfig(undefined, [...EMBEDDED_RECIPE, 'optim.lr=2e-5', 'rollout.maxTurns=12', 'rollout.maxBatch=32']);
    assert.equal(cfg.optim.lr, 2e-5);
    assert.equal(cfg.rollout.maxTurns, 12);
    assert.equal(cfg.rollout.maxBatch, 32);
    assert.equal(cfg.optim.miniBatchSize, 1024);
    assert.throws(() => loadConfig(undefined, [...EMBEDDED_RECIPE, 'rollout.maxBatch=0']), /rollout\.maxBatch/);
  });

  test('a software GPU scales down every setting the user did not give, and says which', () => {
    const overrides = ['rollout.maxTurns=3'];
    const cfg = loadConfig(undefined, [...EMBEDDED_RECIPE, ...overrides]);
    const { config, changes } = applySoftwareGpuScale(cfg, overrides);
    assert.equal(config.rollout.maxTurns, 3);
    assert.equal(config.iterations, SOFTWARE_GPU_SCALE.iterations);
    assert.equal(config.rollout.tasksPerIteration, 1);
    assert.equal(config.validation.runs, 1);
    assert.equal(config.optim.miniBatchSize, 16);
    assert.ok(changes.includes('optim.miniBatchSize 1024 -> 16'), changes.join(', '));
    assert.ok(!changes.some((c) => c.startsWith('rollout.maxTurns')));
    // A setting already at or below its scaled value is left alone.
    const small = loadConfig(undefined, ['iterations=1']);
    assert.equal(applySoftwareGpuScale(small, ['iterations=1']).config.iterations, 1);
  });
});
