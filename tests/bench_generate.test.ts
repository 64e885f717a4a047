// The decoding bench on the bundled model's shapes, scaled down: the median of the timed
// runs, every run's figure, and the tokens each batch was asked for.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { benchGenerate } from '../src/bench/generate.ts';
import { gpu } from './support/gpu.ts';

describe('generate bench', () => {
  test('reports the median of the timed runs beside each run, per batch size', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    const rows = (await benchGenerate(rt, 'household', { batches: [1, 3], newTokens: 4, runs: 3 })) as {
      batch: number; new_tokens: number; seconds: number; tokens_per_s: number; tokens_per_s_runs: number[]; dispatches_per_step: number; readbacks: number; readbacks_per_step: number;
    }[];
    assert.deepEqual(rows.map((r) => r.batch), [1, 3]);
    for (const r of rows) {
      assert.equal(r.new_tokens, 4);
      assert.equal(r.tokens_per_s_runs.length, 3);
      const sorted = [...r.tokens_per_s_runs].sort((a, b) => a - b);
      assert.equal(r.tokens_per_s, sorted[1], `median of ${r.tokens_per_s_runs}`);
      // ignoreEos: every row generates all its tokens. seconds is rounded to 1 ms, which
      // on a fast GPU is a few percent of a 4-token run.
      const tokens = r.batch * 4;
      assert.ok(r.tokens_per_s >= tokens / (r.seconds + 0.0005) - 1 && r.tokens_per_s <= tokens / Math.max(r.seconds - 0.0005, 1e-9) + 1, `${r.tokens_per_s} tokens/s over ${r.seconds} s`);
      assert.ok(r.dispatches_per_step > 0);
      // The last run's counts: its 4 steps, the prefill's included, in one chunk between readbacks.
      assert.equal(r.readbacks, Math.ceil(4 / rt.policy.decode.stepsPerReadback));
      assert.equal(r.readbacks_per_step, r.readbacks / 4);
    }
  });
});
