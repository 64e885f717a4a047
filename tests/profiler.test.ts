import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { addKernelTimes, kernelFamily, type KernelTime } from '../src/gpu/profiler.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { add, mul } from '../src/tensor/ops/index.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { gpu } from './support/gpu.ts';

describe('kernel profiler', () => {
  test('timestamp pairs sum per kernel family; a reset counter counts as zero', () => {
    assert.equal(kernelFamily('matmul.skinny<SKINNY_ROWS=1,BIAS=0>'), 'matmul.skinny');
    assert.equal(kernelFamily('adamw.step'), 'adamw.step');
    const times = new Map<string, KernelTime>();
    addKernelTimes(times, ['matmul.main<WG_X=16>', 'rmsnorm.forward', 'matmul.main<WG_X=8>'],
      BigUint64Array.from([1_000n, 3_001_000n, 5_000_000n, 5_500_000n, 6_000_000n, 7_000_000n]));
    addKernelTimes(times, ['rmsnorm.forward'], BigUint64Array.from([9_000n, 8_000n]));
    assert.deepEqual(times.get('matmul.main'), { kernel: 'matmul.main', dispatches: 2, ms: 4 });
    assert.deepEqual(times.get('rmsnorm.forward'), { kernel: 'rmsnorm.forward', dispatches: 2, ms: 0.5 });
  });

  test('on the GPU: every dispatch is counted under its kernel, and results are unchanged; without timestamps it refuses clearly', async () => {
    const rt = await gpu();
    if (!rt.caps.timestampQuery) {
      assert.throws(() => rt.startProfiling(), /kernel profiling needs the timestamp-query feature, which this adapter does not offer/);
      await assert.rejects(rt.profile(), /no profile: call startProfiling\(\) first/);
      return;
    }
    rt.startProfiling();
    try {
      await scopeAsync(async () => {
        const x = tensor(Float32Array.from([1, 2, 3, 4]));
        const y = mul(add(x, x), x);
        assert.deepEqual([...(await y.toArray())], [2, 8, 18, 32]);
      });
      const rows = await rt.profile();
      const dispatches = rows.reduce((s, r) => s + r.dispatches, 0);
      assert.equal(dispatches, 2, JSON.stringify(rows));
      assert.ok(rows.every((r) => r.ms >= 0 && !r.kernel.includes('<')));
    } finally {
      await rt.stopProfiling();
    }
  });
});
