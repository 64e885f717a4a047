import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randn } from '../src/util/random.ts';
import * as ref from '../src/reference/softmax.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { logSoftmax, softmax } from '../src/tensor/ops/softmax.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

const shapes: number[][] = [[5], [1, 1], [7, 333], [3, 2, 17], [2, 1000]];

describe('softmax', () => {
  test('softmax and logSoftmax match the CPU reference on odd shapes', async () => {
    await gpu();
    for (const shape of shapes) {
      const n = shape[shape.length - 1];
      const x = randn(shape.reduce((a, b) => a * b, 1), n + shape.length, 3);
      await scopeAsync(async () => {
        const xt = tensor(x, shape);
        assertClose(await read(softmax(xt)), ref.softmax(x, n), { atol: 1e-6, rtol: 1e-4, label: `softmax ${shape}` });
        assertClose(await read(logSoftmax(xt)), ref.softmax(x, n, true), { atol: 2e-5, rtol: 1e-5, label: `logSoftmax ${shape}` });
      });
    }
  });

  test('rows as long as a Qwen vocabulary, with logits far from zero', async () => {
    await gpu();
    const n = 151936;
    const x = randn(2 * n, 3, 4);
    for (let i = 0; i < n; i++) x[i] += 90;
    x[n + 12345] = 150;
    await scopeAsync(async () => {
      const xt = tensor(x, [2, n]);
      const y = await read(softmax(xt));
      assertClose(y, ref.softmax(x, n), { atol: 1e-8, rtol: 1e-3, label: 'softmax' });
      assertClose(await read(logSoftmax(xt)), ref.softmax(x, n, true), { atol: 1e-4, rtol: 1e-5, label: 'logSoftmax' });
      let total = 0;
      for (let i = 0; i < n; i++) total += y[i];
      assert.ok(Math.abs(total - 1) < 1e-4, `row sums to ${total}`);
    });
  });

  test('backward kernels match the CPU reference', async () => {
    await gpu();
    const shape = [7, 333];
    const x = randn(7 * 333, 4, 2);
    const g = randn(7 * 333, 5);
    for (const log of [false, true]) {
      await scopeAsync(async () => {
        const xt = requireGrad(tensor(x, shape));
        const y = log ? logSoftmax(xt) : softmax(xt);
        backward(y, tensor(g, shape));
        const yv = await read(y);
        assertClose(await read(xt.grad!), ref.softmaxBackward(yv, g, 333, log), { atol: 1e-6, rtol: 1e-4, label: log ? 'logSoftmax' : 'softmax' });
      });
    }
  });

  test('backward passes finite differences', async () => {
    await gpu();
    await gradCheck(softmax, [{ data: randn(3 * 11, 6), shape: [3, 11] }], { label: 'softmax' });
    await gradCheck(logSoftmax, [{ data: randn(2 * 3 * 7, 7), shape: [2, 3, 7] }], { label: 'logSoftmax' });
  });

  test('bad input names the op', async () => {
    await gpu();
    await scopeAsync(async () => {
      assert.throws(() => softmax(tensor(new Int32Array(4), [2, 2])), /softmax: input has dtype i32, expected f32/);
      assert.throws(() => logSoftmax(tensor(new Float32Array(1), [])), /logSoftmax: input \[\] has no last axis/);
    });
  });
});
