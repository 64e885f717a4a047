// The power-of-two scale of a gradient for the tensor-core matmul (shaders/
// grad_scale.wgsl) against its CPU reference: magnitudes from 1e-30 to 1e30, zeros,
// non-finite values, the empty case, and only the first n values counting; and the
// scale for sums of products (the tensor-core attention backward's).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gradScale, productScale } from '../src/kernels/grad_scale.ts';
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

  test('sums of products: terms * max|a| * max|b| * s in [2^13, 2^14), kernel and reference alike', async () => {
    const rt = await gpu();
    const kernel = (a: Float32Array, b: Float32Array, terms: number, na = a.length, nb = b.length) => scopeAsync(async () => {
      const work = [empty([2], 'u32'), empty([2], 'u32')];
      const scale = empty([2], 'f32');
      productScale(rt, tensor(a.length ? a : new Float32Array(1)).buffer, na, tensor(b.length ? b : new Float32Array(1)).buffer, nb, terms, work[0].buffer, work[1].buffer, scale.buffer);
      const [s, inv] = await read(scale);
      return [s, inv];
    });
    let seed = 300;
    for (const [ma, mb] of [[1e-12, 3], [1, 1], [5e3, 0.02], [1e-20, 1e-10]]) {
      const a = randn(3000, seed++).map((v) => v * ma);
      const b = randn(700, seed++).map((v) => v * mb);
      const want = ref.productScale(a, b, 128);
      assert.deepEqual(await kernel(a, b, 128), want, `magnitudes ${ma}, ${mb}`);
      const bound = Math.fround(Math.fround(128 * Math.max(...a.map(Math.abs))) * Math.max(...b.map(Math.abs))) * want[0];
      assert.ok(bound >= 2 ** 13 && bound < 2 ** 14, `bound ${bound}`);
    }
    const a = randn(100, 9);
    assert.deepEqual(await kernel(a, new Float32Array(50), 4), [1, 1], 'b all zeros');
    assert.deepEqual(await kernel(a, randn(50, 10), 4, 0), [1, 1], 'a empty');
    assert.deepEqual(await kernel(a.map((v, i) => (i === 3 ? NaN : v)), randn(50, 10), 4), [1, 1], 'a not finite');
    assert.deepEqual(await kernel(a, Float32Array.of(1e30), 4e9), [1, 1], 'the bound itself past f32');
  });
});
