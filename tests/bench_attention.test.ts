// The attention bench, scaled down: every requested path timed at each shape, and each
// later path's output and gradients compared with the first's.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { benchAttention } from '../src/bench/kernels.ts';
import { gpuOptions } from '../src/cli/gpu_args.ts';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import { gpu } from './support/gpu.ts';

interface Row {
  shape: string; path: string; forward_ms: number; forward_backward_ms: number;
  max_abs_diff_vs_first?: { o: number; dq: number; dk: number; dv: number };
}

describe('attention bench', () => {
  test('times each path and reports how far it is from the first', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    const shapes = [{ name: 'tiny', B: 1, T: 40, Hq: 4, Hkv: 2, D: 64 }];
    const rows = (await benchAttention(rt, shapes, ['uniform', 'tiled', 'blocked'])) as Row[];
    assert.deepEqual(rows.map((r) => r.path), ['uniform', 'tiled', 'blocked']);
    assert.equal(rows[0].max_abs_diff_vs_first, undefined);
    for (const r of rows) {
      assert.equal(r.shape, 'tiny');
      assert.ok(r.forward_ms > 0 && r.forward_backward_ms > r.forward_ms * 0.5, JSON.stringify(r));
    }
    for (const r of rows.slice(1)) {
      const diff = r.max_abs_diff_vs_first!;
      for (const [name, x] of Object.entries(diff)) assert.ok(x < 1e-4, `${r.path} ${name} differs by ${x}`);
    }
    assert.equal(rt.policy.attention.path, 'auto', 'the bench puts the policy back');
  });

  test('--attention sets the runtime\'s path policy; anything else is refused', () => {
    assert.equal(gpuOptions({ attention: 'blocked' }).policy?.attention?.path, 'blocked');
    assert.equal(kernelPolicy(gpuOptions({}).policy).attention.path, 'auto');
    assert.throws(() => gpuOptions({ attention: 'flash' }), /--attention must be auto, tiled, blocked or uniform, got "flash"/);
  });
});
