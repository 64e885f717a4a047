import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randn } from '../src/util/random.ts';
import { takeRows } from '../src/tensor/ops/create.ts';
import { permute, slice } from '../src/tensor/ops/shape_ops.ts';
import { simplifyStrided } from '../src/kernels/copy.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

/** CPU permute of a row-major array: output dim i is input dim perm[i]. */
function permuteRef(x: Float32Array, shape: number[], perm: number[]): Float32Array {
  const outShape = perm.map((p) => shape[p]);
  const strides = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const out = new Float32Array(x.length);
  const idx = new Array(shape.length).fill(0);
  for (let o = 0; o < out.length; o++) {
    let rem = o;
    for (let i = outShape.length - 1; i >= 0; i--) {
      idx[i] = rem % outShape[i];
      rem = Math.floor(rem / outShape[i]);
    }
    out[o] = x[idx.reduce((s, v, i) => s + v * strides[perm[i]], 0)];
  }
  return out;
}

const size = (s: number[]) => s.reduce((a, b) => a * b, 1);

describe('shape ops', () => {
  test('permute matches the reference; moving only size-1 axes is a view of the same buffer', async () => {
    await gpu();
    const cases: [number[], number[], boolean][] = [
      [[2, 3, 4], [2, 0, 1], false],
      [[2, 3, 4], [0, 2, 1], false],
      [[2, 1, 3, 4], [0, 2, 1, 3], true],
      [[2, 3, 1, 4], [0, 2, 1, 3], true],
      [[3, 1, 1, 5], [0, 2, 1, 3], true],
      [[1, 4, 1, 3], [2, 1, 0, 3], true],
      // Rows of whole 16-byte words: the vec4 copies.
      [[2, 3, 5, 8], [0, 2, 1, 3], false],
      [[3, 4, 2, 4], [2, 0, 1, 3], false],
      [[2, 6, 12], [1, 0, 2], false],
    ];
    for (const [shape, perm, isView] of cases) {
      const x = randn(size(shape), 3);
      await scopeAsync(async () => {
        const xt = tensor(x, shape);
        const y = permute(xt, perm);
        assert.deepEqual([...y.shape], perm.map((p) => shape[p]));
        assert.equal(y.buffer === xt.buffer, isView, `permute ${shape} by ${perm}: view ${isView}`);
        assertClose(await read(y), permuteRef(x, shape, perm), { label: `permute ${shape} by ${perm}` });
      });
      await gradCheck((t) => permute(t, perm), [{ data: x, shape }], { label: `permute grad ${shape} by ${perm}` });
    }
  });

  test('strided copies drop size-1 dims, merge runs contiguous on the strided side, and move vec4s along 16-byte runs', () => {
    // A head permute [B, T, H, D] -> [B, H, T, D] read from [B, T, H, D] strides.
    assert.deepEqual(simplifyStrided([2, 4, 3, 64], [768, 64, 256, 1], 0), { shape: [2, 4, 3, 16], stride: [192, 16, 64, 1], offset: 0, wide: true });
    // A slice along the middle axis: the rows below it merge with the last dim.
    assert.deepEqual(simplifyStrided([2, 3, 5, 8], [160, 40, 8, 1], 40), { shape: [2, 30], stride: [40, 1], offset: 10, wide: true });
    // Odd runs, an odd offset and a broadcast (stride 0) last dim stay element by element.
    assert.equal(simplifyStrided([2, 3, 6], [18, 1, 3], 0).wide, false);
    assert.equal(simplifyStrided([2, 8], [16, 1], 2).wide, false);
    assert.deepEqual(simplifyStrided([2, 1, 8], [1, 5, 0], 0), { shape: [2, 8], stride: [1, 0], offset: 0, wide: false });
    assert.deepEqual(simplifyStrided([1, 1], [7, 3], 5), { shape: [], stride: [], offset: 5, wide: false });
  });

  test('slices along 16-byte runs (vec4 copies) match the reference and pass finite differences', async () => {
    await gpu();
    const x = randn(2 * 5 * 8, 6);
    await scopeAsync(async () => {
      const part = slice(tensor(x, [2, 5, 8]), 1, 1, 4);
      const want = new Float32Array(2 * 3 * 8);
      for (let b = 0; b < 2; b++) want.set(x.subarray(b * 40 + 8, b * 40 + 32), b * 24);
      assert.deepEqual(await read(part), want);
    });
    await gradCheck((t) => slice(t, 1, 1, 4), [{ data: x, shape: [2, 5, 8] }], { label: 'wide slice grad' });
  });

  test('slice copies a range, a full range is a view; both pass finite differences', async () => {
    await gpu();
    const x = randn(2 * 5 * 3, 4);
    await scopeAsync(async () => {
      const xt = tensor(x, [2, 5, 3]);
      const part = slice(xt, 1, 1, 4);
      const want = new Float32Array(2 * 3 * 3);
      for (let b = 0; b < 2; b++) want.set(x.subarray(b * 15 + 3, b * 15 + 12), b * 9);
      assertClose(await read(part), want);
      const full = slice(xt, 1, 0, 5);
      assert.equal(full.buffer, xt.buffer);
      assertClose(await read(full), x);
    });
    await gradCheck((t) => slice(t, 1, 1, 4), [{ data: x, shape: [2, 5, 3] }], { label: 'slice grad' });
    await gradCheck((t) => slice(t, 2, 0, 3), [{ data: x, shape: [2, 5, 3] }], { label: 'full slice grad' });
  });

  test('takeRows copies rows of the first axis in the order asked, runs and repeats alike; bad rows are named', async () => {
    await gpu();
    const shape = [5, 2, 3];
    const x = randn(size(shape), 9);
    await scopeAsync(async () => {
      const rows = [4, 1, 2, 3, 1];
      const got = await read(takeRows(tensor(x, shape), rows));
      const want = Float32Array.from(rows.flatMap((r) => [...x.subarray(r * 6, r * 6 + 6)]));
      assert.deepEqual([...got], [...want]);
      assert.deepEqual(takeRows(tensor(x, shape), [0, 2]).shape, [2, 2, 3]);
      assert.throws(() => takeRows(tensor(x, shape), [0, 5]), /takeRows: rows\[1\] = 5 is not a row of \[5, 2, 3\]/);
    });
  });
});
