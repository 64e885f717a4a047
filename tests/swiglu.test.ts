import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randn } from '../src/util/random.ts';
import * as ref from '../src/reference/swiglu.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { swiglu } from '../src/tensor/ops/swiglu.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

describe('swiglu', () => {
  test('forward matches the CPU reference', async () => {
    await gpu();
    const shape = [3, 7, 53];
    const n = 3 * 7 * 53;
    const gate = randn(n, 1, 3);
    const up = randn(n, 2);
    await scopeAsync(async () => {
      const y = swiglu(tensor(gate, shape), tensor(up, shape));
      assert.deepEqual([...y.shape], shape);
      assertClose(await read(y), ref.swigluForward(gate, up), { label: 'swiglu' });
    });
  });

  test('backward matches the CPU reference', async () => {
    await gpu();
    const n = 5 * 41;
    const gate = randn(n, 3, 3);
    const up = randn(n, 4);
    const g = randn(n, 5);
    await scopeAsync(async () => {
      const gt = requireGrad(tensor(gate, [5, 41]));
      const ut = requireGrad(tensor(up, [5, 41]));
      backward(swiglu(gt, ut), tensor(g, [5, 41]));
      const want = ref.swigluBackward(gate, up, g);
      assertClose(await read(gt.grad!), want.dgate, { label: 'dgate' });
      assertClose(await read(ut.grad!), want.dup, { label: 'dup' });
      gt.dispose();
      ut.dispose();
    });
  });

  test('backward passes finite differences', async () => {
    await gpu();
    await gradCheck(swiglu, [
      { data: randn(2 * 19, 6, 2), shape: [2, 19] },
      { data: randn(2 * 19, 7), shape: [2, 19] },
    ], { label: 'swiglu', probe: 8 });
  });

  test('shapes that differ are refused naming both', async () => {
    await gpu();
    await scopeAsync(async () => {
      assert.throws(() => swiglu(tensor(new Float32Array(6), [2, 3]), tensor(new Float32Array(6), [3, 2])), /swiglu: gate \[2, 3\] and up \[3, 2\] differ in shape/);
      assert.throws(() => swiglu(tensor(new Int32Array(2), [2]), tensor(new Float32Array(2), [2])), /swiglu: gate has dtype i32, expected f32/);
    });
  });
});
