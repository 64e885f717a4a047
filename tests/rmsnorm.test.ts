import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randn, uniform } from '../src/util/random.ts';
import * as ref from '../src/reference/rmsnorm.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { rmsNorm } from '../src/tensor/ops/rmsnorm.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { numel } from '../src/tensor/shape.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

// [2, 3, 7, 64] is the q/k-norm case: each head's 64-vector of [B, H, T, D].
const shapes = [[3, 5, 37], [2, 96], [4, 301], [2, 3, 7, 64], [1, 5]];

describe('rmsNorm', () => {
  test('forward matches the CPU reference', async () => {
    await gpu();
    for (const shape of shapes) {
      const h = shape[shape.length - 1];
      const x = randn(numel(shape), 1, 2);
      const w = uniform(h, 2, 0.5, 1.5);
      await scopeAsync(async () => {
        const y = rmsNorm(tensor(x, shape), tensor(w, [h]), 1e-6);
        assert.deepEqual([...y.shape], shape);
        assertClose(await read(y), ref.rmsNormForward(x, w, 1e-6), { label: `y ${shape}` });
      });
    }
  });

  test('backward matches the CPU reference, across several dweight row blocks', async () => {
    await gpu();
    // 70 rows: three blocks of the column reduction; 301 columns: two column blocks.
    for (const shape of [[70, 37], [5, 14, 301], [3, 64]]) {
      const h = shape[shape.length - 1];
      const x = randn(numel(shape), 3);
      const w = uniform(h, 4, 0.5, 1.5);
      const g = randn(numel(shape), 5);
      await scopeAsync(async () => {
        const xt = requireGrad(tensor(x, shape));
        const wt = requireGrad(tensor(w, [h]));
        backward(rmsNorm(xt, wt, 1e-5), tensor(g, shape));
        const want = ref.rmsNormBackward(x, w, g, 1e-5);
        assertClose(await read(xt.grad!), want.dx, { atol: 1e-5, rtol: 1e-4, label: `dx ${shape}` });
        assertClose(await read(wt.grad!), want.dw, { atol: 1e-4, rtol: 1e-4, label: `dw ${shape}` });
        xt.dispose();
        wt.dispose();
      });
    }
  });

  test('backward passes finite differences for x and weight', async () => {
    await gpu();
    for (const [rows, h] of [[3, 37], [2, 96]]) {
      await gradCheck((x, w) => rmsNorm(x, w, 1e-6), [
        { data: randn(rows * h, 6), shape: [rows, h] },
        { data: uniform(h, 7, 0.5, 1.5), shape: [h] },
      ], { label: `rmsNorm h=${h}`, probe: 8 });
    }
  });

  test('only the gradients that are needed are computed', async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(randn(6, 8), [2, 3]);
      const w = requireGrad(tensor(uniform(3, 9, 0.5, 1.5), [3]));
      backward(rmsNorm(x, w), tensor(randn(6, 10), [2, 3]));
      assert.equal(x.grad, null);
      assert.ok(w.grad);
      w.dispose();
    });
  });

  test('mismatched weight and dtypes are refused naming the op and shapes', async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(new Float32Array(12), [3, 4]);
      assert.throws(() => rmsNorm(x, tensor(new Float32Array(3), [3])), /rmsNorm: weight \[3\] does not match the last dim of x \[3, 4\]/);
      assert.throws(() => rmsNorm(x, tensor(new Float32Array(4), [1, 4])), /rmsNorm: weight \[1, 4\]/);
      assert.throws(() => rmsNorm(tensor(new Int32Array(4), [4]), tensor(new Float32Array(4), [4])), /rmsNorm: x has dtype i32, expected f32/);
    });
  });
});
