import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as ref from '../src/reference/elementwise.ts';
import { randn, uniform } from '../src/util/random.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import * as F from '../src/tensor/ops/index.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

const unaryCases: [string, (x: import('../src/tensor/tensor.ts').Tensor) => import('../src/tensor/tensor.ts').Tensor, boolean][] = [
  ['neg', F.neg, false], ['exp', F.exp, false], ['log', F.log, true], ['sqrt', F.sqrt, true], ['rsqrt', F.rsqrt, true],
  ['silu', F.silu, false], ['sigmoid', F.sigmoid, false], ['tanh', F.tanh, false], ['abs', F.abs, false],
  ['square', F.square, false], ['recip', F.recip, true],
];

describe('elementwise', () => {
  test('unary ops match the CPU reference on an odd-sized tensor', async () => {
    await gpu();
    for (const [name, fn, positive] of unaryCases) {
      const x = positive ? uniform(1031, 3, 0.2, 3) : randn(1031, 3);
      await scopeAsync(async () => {
        const y = await read(fn(tensor(x, [1031])));
        assertClose(y, ref.unary(name, x), { atol: 1e-5, rtol: 1e-4, label: name });
      });
    }
  });

  test('unary backward passes finite differences', async () => {
    await gpu();
    for (const [name, fn, positive] of unaryCases) {
      const x = positive ? uniform(37, 5, 0.5, 2) : randn(37, 5);
      await gradCheck(fn, [{ data: x, shape: [37] }], { label: name });
    }
    await gradCheck((x) => F.affine(x, 2.5, -1), [{ data: randn(9, 1), shape: [9] }], { label: 'affine' });
    await gradCheck((x) => F.pow(x, 3), [{ data: uniform(9, 1, 0.5, 2), shape: [9] }], { label: 'pow' });
  });

  test('binary ops broadcast like NumPy', async () => {
    await gpu();
    const shapes: [number[], number[]][] = [[[5, 7], [5, 7]], [[3, 1, 7], [4, 1]], [[1], [2, 3]], [[6, 1], [1, 9]], [[2, 3, 4, 5], [5]]];
    for (const op of ['add', 'sub', 'mul', 'div', 'maximum', 'minimum'] as const) {
      for (const [as, bs] of shapes) {
        const a = randn(as.reduce((x, y) => x * y, 1), 11);
        const b = uniform(bs.reduce((x, y) => x * y, 1), 12, 0.5, 2);
        await scopeAsync(async () => {
          const y = F[op](tensor(a, as), tensor(b, bs));
          const want = ref.binary(op, a, as, b, bs);
          assert.deepEqual([...y.shape], want.shape);
          assertClose(await read(y), want.data, { label: `${op} ${as} ${bs}` });
        });
      }
    }
  });

  test('binary backward with broadcasting passes finite differences', async () => {
    await gpu();
    for (const op of ['add', 'sub', 'mul', 'div', 'maximum'] as const) {
      await gradCheck((a, b) => F[op](a, b), [
        { data: randn(12, 1), shape: [3, 1, 4] },
        { data: uniform(8, 2, 0.5, 2), shape: [2, 4] },
      ], { label: op });
    }
  });

  test('maximum and minimum split the gradient on ties, as PyTorch does', async () => {
    await gpu();
    await scopeAsync(async () => {
      const { requireGrad, backward } = await import('../src/tensor/autograd.ts');
      const x = requireGrad(tensor([1, -2, 3], [3]));
      backward(F.sum(F.add(F.maximum(x, x), F.minimum(x, x))));
      assert.deepEqual([...(await read(x.grad!))], [2, 2, 2]);
    });
  });

  test('shape errors name the op and shapes', async () => {
    await gpu();
    await scopeAsync(async () => {
      assert.throws(() => F.add(tensor(new Float32Array(6), [2, 3]), tensor(new Float32Array(4), [4])), /add: shapes \[2, 3\] and \[4\] do not broadcast/);
      assert.throws(() => F.exp(tensor(new Int32Array(3), [3])), /exp: input has dtype i32, expected f32/);
    });
  });
});
