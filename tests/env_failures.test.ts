// The rule for episodes that fail in their environment (src/rollout/env_failures.ts):
// every episode failing stops the run whatever the threshold, a failed share past
// env.maxFailedShare stops it, fewer are shown on the console line.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../src/config/config.ts';
import { summaryLine } from '../src/report/metrics.ts';
import { checkEnvFailures, countEnvFailures, EnvFailureError } from '../src/rollout/env_failures.ts';

const episodes = (failed: number, total: number) =>
  Array.from({ length: total }, (_, i) => (i >= total - failed ? { error: `starting the episode (split train, seed ${i}): list index out of range` } : {}));

describe('environment failures', () => {
  test('counts the failed episodes and keeps the first error', () => {
    assert.deepEqual(countEnvFailures(episodes(0, 4)), { episodes: 4, failed: 0, firstError: null });
    assert.deepEqual(countEnvFailures(episodes(2, 8)), { episodes: 8, failed: 2, firstError: 'starting the episode (split train, seed 6): list index out of range' });
  });

  test('every episode failing stops the run whatever the threshold; a share past it stops it too; at or below it does not', () => {
    assert.throws(() => checkEnvFailures(countEnvFailures(episodes(4, 4)), 1, 'iteration 3'), (e: unknown) => {
      assert.ok(e instanceof EnvFailureError);
      assert.equal(e.message, "iteration 3: every one of its 4 episodes failed in the environment; the server's first error: starting the episode (split train, seed 0): list index out of range");
      return true;
    });
    assert.throws(() => checkEnvFailures(countEnvFailures(episodes(3, 10)), 0.2, 'validation at iteration 5'), (e: unknown) => {
      assert.ok(e instanceof EnvFailureError);
      assert.match(e.message, /^validation at iteration 5: 3 of 10 episodes \(30%\) failed in the environment, more than env\.maxFailedShare \(20%\); the first error: /);
      return true;
    });
    assert.deepEqual(checkEnvFailures(countEnvFailures(episodes(2, 10)), 0.2, 'iteration 1').failed, 2);
    assert.throws(() => checkEnvFailures(countEnvFailures(episodes(1, 10)), 0, 'iteration 1'), EnvFailureError);
    assert.throws(() => checkEnvFailures(countEnvFailures(episodes(0, 2)), 1.5, 'iteration 1'), RangeError);
  });

  test('env.maxFailedShare defaults to 0.2 and is a share', () => {
    assert.equal(loadConfig().env.maxFailedShare, 0.2);
    assert.equal(loadConfig(undefined, ['env.maxFailedShare=0']).env.maxFailedShare, 0);
    assert.throws(() => loadConfig(undefined, ['env.maxFailedShare=2']), /env\.maxFailedShare/);
  });

  test('the console line shows failed episodes of the iteration and of validation', () => {
    const line = summaryLine(2, 10, { 'rollout/success': 0.5, 'rollout/failed': 2, 'rollout/trajectories': 16, 'val/success': 0.25, 'val/failed': 0, 'val/trajectories': 32 });
    assert.equal(line, 'iter 2/10 | success 0.5000 | val 0.2500 | env failed 2/16');
    assert.equal(summaryLine(2, 10, { 'rollout/success': 0.5, 'rollout/failed': 0, 'rollout/trajectories': 16, 'val/failed': 1, 'val/trajectories': 32 }), 'iter 2/10 | success 0.5000 | val env failed 1/32');
  });
});
