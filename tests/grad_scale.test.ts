// The power-of-two scale of a gradient for the tensor-core matmul (shaders/
// grad_scale.wgsl) against its CPU reference: magnitudes from 1e-30 to 1e30, zeros,
// non-finite values, the empty case, and only the first n values counting.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gradScale } from '../src/kernels/grad_scale.ts';
import * as ref from '../src/reference/grad_scale.ts';
import { randn } from '../src/util/random.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { empty, tensor } from '../src/tensor/tensor.ts';
import { gpu, read } from './support/gpu.ts';

async function scaleOf(values: Float32Array, n = values.length): Promise<[number, number]> {
  const rt = await gpu();
  return scopeAsync(async () => {
    const x = tensor(values.length ? values : new Float32Array(1));
    const work = empty([2], 'u32');
    const scale = empty([2], 'f32');
    gradScale(rt, x.buffer, n, work.buffer, scale.buffer);
    const [s, inv] = await read(scale);
    return [s, inv];
  });
}

describe('gradient scale', () => {
  test('the reference puts the largest magnitude in [2^13, 2^14) with an exact inverse', () => {
    for (const m of [1e-30, 3e-9, 2 ** -20, 0.7, 1, 8191.5, 8192, 16384, 1e30]) {
      const [s, inv] = ref.gradScale([0.25 * m, -m]);
      assert.equal(s * inv, 1);
      assert.equal(2 ** Math.round(Math.log2(s)), s);
      if (m >= 1e-29) assert.ok(m * s >= 2 ** 13 && m * s < 2 ** 14, `max ${m}: scaled ${m * s}`);
    }
    assert.deepEqual(ref.gradScale([]), [1, 1]);
    assert.deepEqual(ref.gradScale([0, -0]), [1, 1]);
    assert.deepEqual(ref.gradScale([1, NaN]), [1, 1]);
    assert.deepEqual(ref.gradScale([-Infinity, 1]), [1, 1]);
  });

  test('the kernel matches the reference over magnitudes, signs and sizes', async () => {
    let seed = 70;
    for (const n of [1, 255, 256, 257, 5000, 300_000]) {
      for (const magnitude of [1e-30, 1e-9, 1, 1e6, 1e30]) {
        const x = randn(n, seed++).map((v) => v * magnitude);
        assert.deepEqual(await scaleOf(x), ref.gradScale(x), `n ${n}, magnitude ${magnitude}`);
      }
    }
  });

  test('zeros, NaN and infinity give 1; only the first n values count; n = 0 gives 1', async () => {
    assert.deepEqual(await scaleOf(new Float32Array(1000)), [1, 1]);
    const x = randn(1000, 5);
    x[777] = NaN;
    assert.deepEqual(await scaleOf(x), [1, 1]);
    x[777] = -Infinity;
    assert.deepEqual(await scaleOf(x), [1, 1]);
    const y = randn(1000, 6).map((v) => v * 1e-6);
    y[900] = 1e20;
    assert.deepEqual(await scaleOf(y, 900), ref.gradScale(y.subarray(0, 900)));
    assert.deepEqual(await scaleOf(y, 0), [1, 1]);
  });
});
