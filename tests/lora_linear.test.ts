// The LoRA projection as one op (tensor/ops/lora_linear.ts) against the same projection
// composed from linear, scale and add: outputs and every input's gradient, with and
// without a bias, batched rows, finite differences, and what the tape keeps.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { add, linear, loraLinear, mul, scale, sum } from '../src/tensor/ops/index.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, type Tensor } from '../src/tensor/tensor.ts';
import { randn } from '../src/util/random.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

const composed = (x: Tensor, w: Tensor, bias: Tensor | undefined, a: Tensor, b: Tensor, s: number) => add(linear(x, w, bias), scale(linear(linear(x, a), b), s));

describe('loraLinear', () => {
  for (const withBias of [false, true]) {
    test(`equals linear + scale (x A^T) B^T in value and in every gradient${withBias ? ', with a bias' : ''}`, async () => {
      await gpu();
      const [outF, inF, r] = [24, 20, 4];
      const shapes = { x: [2, 3, inF], w: [outF, inF], bias: [outF], a: [r, inF], b: [outF, r], g: [2, 3, outF] };
      const data = Object.fromEntries(Object.entries(shapes).map(([k, s], i) => [k, randn(s.reduce((p, q) => p * q, 1), 11 + i)]));
      const run = async (f: typeof loraLinear) => scopeAsync(async () => {
        const t = (k: keyof typeof shapes) => requireGrad(tensor(data[k], shapes[k]));
        const [x, w, a, b] = [t('x'), t('w'), t('a'), t('b')];
        const bias = withBias ? t('bias') : undefined;
        const y = f(x, w, bias, a, b, 0.75);
        backward(sum(mul(y, tensor(data.g, shapes.g))));
        return { y: await read(y), grads: await Promise.all([x, w, a, b, ...(bias ? [bias] : [])].map((p) => read(p.grad!))) };
      });
      const fused = await run(loraLinear);
      const plain = await run(composed);
      assertClose(fused.y, plain.y, { atol: 1e-5, rtol: 1e-5, label: 'y' });
      ['x', 'w', 'a', 'b', 'bias'].slice(0, fused.grads.length).forEach((name, i) => assertClose(fused.grads[i], plain.grads[i], { atol: 1e-4, rtol: 1e-5, label: `d${name}` }));
    });
  }

  test('passes finite differences in x, the weight, the bias and both factors', async () => {
    await gpu();
    await gradCheck((x, w, bias, a, b) => loraLinear(x, w, bias, a, b, 1.5), [
      { data: randn(2 * 6, 1), shape: [2, 6] },
      { data: randn(5 * 6, 2), shape: [5, 6] },
      { data: randn(5, 3), shape: [5] },
      { data: randn(3 * 6, 4), shape: [3, 6] },
      { data: randn(5 * 3, 5), shape: [5, 3] },
    ], { label: 'loraLinear' });
  });

  test('the tape keeps the output and the branch\'s [rows, r] activation, not three more outputs of the layer\'s width', async () => {
    const rt = await gpu();
    const [rows, outF, inF, r] = [256, 512, 64, 4];
    await scopeAsync(async () => {
      const x = requireGrad(tensor(randn(rows * inF, 1), [rows, inF]));
      const w = tensor(randn(outF * inF, 2), [outF, inF]);
      const a = requireGrad(tensor(randn(r * inF, 3), [r, inF]));
      const b = requireGrad(tensor(randn(outF * r, 4), [outF, r]));
      await rt.sync();
      const before = rt.pool.stats.inUse;
      const y = loraLinear(x, w, undefined, a, b, 2);
      await rt.sync();
      const held = rt.pool.stats.inUse - before;
      const width = 4 * rows * outF;
      assert.ok(held < 1.5 * width, `the forward holds ${held} B; one output is ${width} B`);
      backward(sum(y));
    });
  });

  test('names the shapes it refuses', async () => {
    await gpu();
    await scopeAsync(async () => {
      const t = (s: number[]) => tensor(new Float32Array(s.reduce((p, q) => p * q, 1)), s);
      assert.throws(() => loraLinear(t([2, 6]), t([5, 6]), undefined, t([3, 7]), t([5, 3]), 1), /loraLinear: x \[2, 6\], weight \[5, 6\], a \[3, 7\], b \[5, 3\]: a must be \[r, 6\] and b \[5, r\]/);
      assert.throws(() => loraLinear(t([2, 4]), t([5, 6]), undefined, t([3, 6]), t([5, 3]), 1), /x's last dim must be in = 6/);
    });
  });
});
