import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { planByToken } from '../src/kernels/embedding.ts';
import * as ref from '../src/reference/embedding.ts';
import { randn, mulberry32 } from '../src/util/random.ts';
import { backward, noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { embedding } from '../src/tensor/ops/embedding.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

function randomIds(n: number, vocab: number, seed: number): Int32Array {
  const r = mulberry32(seed);
  return Int32Array.from({ length: n }, () => Math.floor(r() * vocab));
}

describe('embedding', () => {
  test('the plan groups positions by sorted unique id', () => {
    const plan = planByToken(Int32Array.from([4, 1, 4, 0, 1, 4]));
    assert.equal(plan.unique, 3);
    assert.deepEqual([...plan.data], [0, 1, 4, /* offsets */ 0, 1, 3, 6, /* positions */ 3, 1, 4, 0, 2, 5]);
  });

  test('forward gathers rows like the reference, with repeated ids', async () => {
    await gpu();
    const vocab = 11;
    const h = 37;
    const w = randn(vocab * h, 1);
    const ids = Int32Array.from([3, 7, 3, 0, 10, 3, 7, 1, 2, 0, 5, 3, 9, 9, 4]);
    await scopeAsync(async () => {
      const out = embedding(tensor(w, [vocab, h]), ids, [3, 5]);
      assert.deepEqual([...out.shape], [3, 5, h]);
      assert.deepEqual(await read(out), ref.embeddingForward(w, h, ids));
      const viaTensor = embedding(tensor(w, [vocab, h]), tensor(ids, [5, 3]), ids);
      assert.deepEqual([...viaTensor.shape], [5, 3, h]);
      assert.deepEqual(await read(viaTensor), ref.embeddingForward(w, h, ids));
    });
  });

  test('ids left on the GPU (a decoding step) gather the same rows and refuse a gradient', async () => {
    await gpu();
    const vocab = 9;
    const h = 16;
    const w = randn(vocab * h, 2);
    const ids = Int32Array.from([8, 0, 3, 3, 5, 1]);
    await scopeAsync(async () => {
      const weight = tensor(w, [vocab, h]);
      const onDevice = noGrad(() => embedding(weight, tensor(ids, [6], 'i32'), [2, 3]));
      assert.deepEqual([...onDevice.shape], [2, 3, h]);
      assert.deepEqual(await read(onDevice), ref.embeddingForward(w, h, ids));
      assert.deepEqual([...embedding(weight, tensor(ids, [3, 2], 'i32')).shape], [3, 2, h]);
      requireGrad(weight);
      assert.throws(() => embedding(weight, tensor(ids, [6], 'i32')), /no gradient.*noGrad/);
      assert.throws(() => noGrad(() => embedding(weight, tensor(ids, [6], 'i32'), [4, 2])), /ids \[6\] do not fill shape \[4, 2\]/);
      assert.throws(() => noGrad(() => embedding(weight, tensor(new Uint32Array(6), [6], 'u32'))), /embedding.*ids.*i32/);
    });
  });

  test('backward sums gradient rows per id, zeros elsewhere, deterministically', async () => {
    await gpu();
    // h > 256 spreads one id over two column blocks.
    for (const [vocab, h, n] of [[13, 37, 29], [7, 301, 23]]) {
      const w = randn(vocab * h, 2);
      const ids = randomIds(n, vocab - 2, 3);
      const g = randn(n * h, 4);
      const grads: Float32Array[] = [];
      for (let run = 0; run < 2; run++) {
        await scopeAsync(async () => {
          const wt = requireGrad(tensor(w, [vocab, h]));
          backward(embedding(wt, ids), tensor(g, [n, h]));
          grads.push(await read(wt.grad!));
          wt.dispose();
        });
      }
      const want = ref.embeddingBackward(g, h, ids, vocab);
      assertClose(grads[0], want, { atol: 1e-5, rtol: 1e-5, label: `dweight h=${h}` });
      assert.deepEqual(grads[0].subarray((vocab - 2) * h), new Float32Array(2 * h), 'rows of absent ids stay zero');
      assert.deepEqual(grads[1], grads[0], 'two runs give identical bits');
    }
  });

  test('backward passes finite differences', async () => {
    await gpu();
    const ids = Int32Array.from([2, 0, 2, 5, 2, 1]);
    await gradCheck((w) => embedding(w, ids, [2, 3]), [{ data: randn(6 * 9, 5), shape: [6, 9] }], { label: 'embedding', probe: 12 });
  });

  test('bad ids and shapes are refused with the op and shapes named', async () => {
    await gpu();
    await scopeAsync(async () => {
      const w = tensor(new Float32Array(12), [4, 3]);
      assert.throws(() => embedding(w, Int32Array.from([1, 4])), /embedding: id 4 at position 1 is outside the vocabulary \[0, 4\) of weight \[4, 3\]/);
      assert.throws(() => embedding(w, Int32Array.from([-1])), /embedding: id -1/);
      assert.throws(() => embedding(w, Int32Array.from([1, 2, 3]), [2, 2]), /embedding: 3 ids do not fill shape \[2, 2\]/);
      assert.throws(() => embedding(tensor(new Float32Array(12), [12]), Int32Array.from([1])), /embedding: weight must be \[vocab, hidden\], got \[12\]/);
      assert.throws(() => embedding(w, tensor(new Float32Array(2), [2]), Int32Array.from([1, 2])), /embedding: ids has dtype f32, expected i32/);
      assert.throws(() => embedding(w, tensor(Int32Array.from([1, 2]), [2]), Int32Array.from([1])), /embedding: host copy has 1 ids, the ids tensor \[2\] has 2/);
    });
  });
});
