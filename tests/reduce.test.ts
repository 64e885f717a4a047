import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import * as rk from '../src/kernels/reduce.ts';
import * as ref from '../src/reference/reduce.ts';
import { randn } from '../src/util/random.ts';
import { max, mean, sum } from '../src/tensor/ops/reduce.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { empty, tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

describe('reduce kernels', () => {
  test('rows and columns of [outer, r, inner] match the reference for sum, mean and max', async () => {
    const rt = await gpu();
    // Inner 1 takes reduce_rows; otherwise reduce_cols, here with partial 32-column
    // blocks, several outer rows, r below and above the eight row slices.
    const shapes: [number, number, number][] = [[5, 300, 1], [1, 1, 7], [3, 5, 45], [2, 600, 70], [1, 4096, 33]];
    let seed = 11;
    for (const [outer, r, inner] of shapes) {
      const x = randn(outer * r * inner, seed++);
      for (const op of ['sum', 'mean', 'max'] as const) {
        await scopeAsync(async () => {
          const y = empty([outer * inner]);
          rk.reduce(rt, op, tensor(x).buffer, y.buffer, outer, r, inner);
          assertClose(await read(y), ref.reduce(x, outer, r, inner, op), { atol: 1e-4, rtol: 1e-4, label: `${op} [${outer}, ${r}, ${inner}]` });
        });
      }
    }
  });

  test('reduce_cols with R cut into parts matches the reference (even and uneven parts, several outer rows)', async () => {
    const rt = await gpu();
    let seed = 51;
    for (const [outer, r, inner, parts] of [[1, 100, 40, 4], [2, 37, 33, 5], [3, 9, 64, 4], [1, 64, 8, 64]]) {
      const x = randn(outer * r * inner, seed++);
      for (const op of ['sum', 'mean', 'max'] as const) {
        await scopeAsync(async () => {
          const y = empty([outer * inner]);
          rk.reduceColsInParts(rt, op, tensor(x).buffer, y.buffer, outer, r, inner, parts);
          assertClose(await read(y), ref.reduce(x, outer, r, inner, op), { atol: 1e-4, rtol: 1e-4, label: `${op} [${outer}, ${r}, ${inner}] in ${parts} parts` });
        });
      }
    }
  });

  test('R is cut only where reduce_cols would have too few workgroups and enough rows per part', () => {
    const policy = kernelPolicy().reduce;
    // A [32768, 256] bias gradient: 8 workgroups whole, 32 parts of 1,024 rows cut.
    assert.equal(rk.reduceColsParts(1, 32768, 256, policy), 32);
    // Qwen2.5-0.5B's [4096, 896] bias gradient: 28 workgroups, 8 parts of 512 rows.
    assert.equal(rk.reduceColsParts(1, 4096, 896, policy), 8);
    assert.equal(rk.reduceColsParts(1, 32768, 4864, policy), 1);
    assert.equal(rk.reduceColsParts(1, 700, 64, policy), 1);
    // No part shorter than minSpan: 1,000 rows make 3 parts of at least 300.
    assert.equal(rk.reduceColsParts(1, 1000, 64, { ...policy, minSpan: 300 }), 3);
  });

  test('sum, mean and max over axes pass finite differences', async () => {
    await gpu();
    const x = randn(3 * 40 * 5, 31);
    const shape = [3, 40, 5];
    for (const axis of [0, 1, 2, [0, 2]]) {
      await gradCheck((t) => sum(t, axis), [{ data: x, shape }], { label: `sum ${axis}` });
      await gradCheck((t) => mean(t, axis), [{ data: x, shape }], { label: `mean ${axis}` });
      await gradCheck((t) => max(t, axis), [{ data: x, shape }], { label: `max ${axis}` });
    }
  });
});
