import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as ref from '../src/reference/conv1d.ts';
import { randn } from '../src/util/random.ts';
import { backward, noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { causalConv1d } from '../src/tensor/ops/conv1d.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

describe('causalConv1d', () => {
  test('forward matches the CPU reference (SiLU or not, left padding)', async () => {
    await gpu();
    const cases: [ref.Conv1dDims, boolean, number[] | null][] = [
      [{ b: 2, t: 7, c: 5, k: 4 }, true, null],
      [{ b: 3, t: 9, c: 13, k: 4 }, false, [0, 2, 5]],
      [{ b: 1, t: 3, c: 6, k: 5 }, true, null],
      [{ b: 2, t: 11, c: 3, k: 1 }, true, [1, 0]],
    ];
    for (const [d, silu, pads] of cases) {
      const x = randn(d.b * d.t * d.c, 1);
      const w = randn(d.c * d.k, 2, 0.5);
      const padLeft = pads ? Int32Array.from(pads) : undefined;
      await scopeAsync(async () => {
        const y = causalConv1d(tensor(x, [d.b, d.t, d.c]), tensor(w, [d.c, 1, d.k]), { silu, padLeft: padLeft && tensor(padLeft, [d.b], 'i32') });
        assert.deepEqual([...y.shape], [d.b, d.t, d.c]);
        assertClose(await read(y), ref.conv1dForward(x, w, d, { silu, padLeft }).y, { label: `y ${JSON.stringify(d)}` });
      });
    }
  });

  test('token-by-token decoding with the state equals the full pass', async () => {
    await gpu();
    const d = { b: 2, t: 6, c: 7, k: 4 };
    const x = randn(d.b * d.t * d.c, 3);
    const w = randn(d.c * d.k, 4, 0.5);
    const padLeft = Int32Array.from([0, 2]);
    const full = ref.conv1dForward(x, w, d, { silu: true, padLeft });
    await scopeAsync(async () => {
      const state = zeros([d.b, d.k - 1, d.c]);
      const pad = tensor(padLeft, [d.b], 'i32');
      const wt = tensor(w, [d.c, d.k]);
      // A prefill of 4 tokens (two of row 1 are padding), then one token at a time.
      const split = [4, 1, 1];
      let at = 0;
      for (const n of split) {
        const part = new Float32Array(d.b * n * d.c);
        for (let b = 0; b < d.b; b++) part.set(x.subarray((b * d.t + at) * d.c, (b * d.t + at + n) * d.c), b * n * d.c);
        const y = await read(noGrad(() => causalConv1d(tensor(part, [d.b, n, d.c]), wt, { silu: true, padLeft: pad, offset: at, state })));
        const want = new Float32Array(d.b * n * d.c);
        for (let b = 0; b < d.b; b++) want.set(full.y.subarray((b * d.t + at) * d.c, (b * d.t + at + n) * d.c), b * n * d.c);
        assertClose(y, want, { label: `tokens ${at}..${at + n}` });
        at += n;
      }
      assertClose(await read(state), full.state, { label: 'final state' });
    });
  });

  test('a state that spans more than the new tokens shifts correctly', async () => {
    await gpu();
    const d = { b: 1, t: 2, c: 3, k: 5 };
    const x = randn(d.b * d.t * d.c, 5);
    const w = randn(d.c * d.k, 6);
    const s0 = randn(d.b * (d.k - 1) * d.c, 7);
    await scopeAsync(async () => {
      const state = tensor(s0, [d.b, d.k - 1, d.c]);
      const y = await read(noGrad(() => causalConv1d(tensor(x, [1, 2, 3]), tensor(w, [3, 5]), { state, offset: 4 })));
      const want = ref.conv1dForward(x, w, d, { state: s0, offset: 4 });
      assertClose(y, want.y, { label: 'y' });
      assertClose(await read(state), want.state, { label: 'state' });
    });
  });

  test('backward matches the CPU reference across several row blocks', async () => {
    await gpu();
    for (const [d, pads] of [[{ b: 3, t: 29, c: 6, k: 4 }, [0, 3, 28]], [{ b: 1, t: 5, c: 9, k: 3 }, null]] as const) {
      const x = randn(d.b * d.t * d.c, 8);
      const w = randn(d.c * d.k, 9, 0.5);
      const dy = randn(d.b * d.t * d.c, 10);
      const padLeft = pads ? Int32Array.from(pads) : undefined;
      await scopeAsync(async () => {
        const xt = requireGrad(tensor(x, [d.b, d.t, d.c]));
        const wt = requireGrad(tensor(w, [d.c, 1, d.k]));
        backward(causalConv1d(xt, wt, { silu: true, padLeft: padLeft && tensor(padLeft, [d.b], 'i32') }), tensor(dy, [d.b, d.t, d.c]));
        const want = ref.conv1dBackward(x, w, dy, d, { silu: true, padLeft });
        assertClose(await read(xt.grad!), want.dx, { atol: 1e-5, rtol: 1e-4, label: 'dx' });
        assertClose(await read(wt.grad!), want.dw, { atol: 1e-4, rtol: 1e-4, label: 'dw' });
        xt.dispose();
        wt.dispose();
      });
    }
  });

  test('backward passes finite differences', async () => {
    await gpu();
    const pad = Int32Array.from([1, 0]);
    await gradCheck((x, w) => causalConv1d(x, w, { silu: true, padLeft: tensor(pad, [2], 'i32') }), [
      { data: randn(2 * 5 * 3, 11), shape: [2, 5, 3] },
      { data: randn(3 * 4, 12, 0.5), shape: [3, 4] },
    ], { label: 'conv1d silu' });
    await gradCheck((x, w) => causalConv1d(x, w), [
      { data: randn(1 * 6 * 2, 13), shape: [1, 6, 2] },
      { data: randn(2 * 3, 14, 0.5), shape: [2, 3] },
    ], { label: 'conv1d linear' });
  });

  test('bad shapes and stateful training are refused', async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(new Float32Array(2 * 3 * 4), [2, 3, 4]);
      assert.throws(() => causalConv1d(x, tensor(new Float32Array(5 * 4), [5, 4])), /causalConv1d: weight must be \[C, K\] or \[C, 1, K\] with C = 4: x \[2, 3, 4\], weight \[5, 4\]/);
      assert.throws(() => causalConv1d(x, tensor(new Float32Array(4 * 3), [4, 3]), { state: zeros([2, 3, 4]) }), /state \[2, 3, 4\] must be \[2, 2, 4\]/);
      const w = requireGrad(tensor(new Float32Array(4 * 3), [4, 3]));
      assert.throws(() => causalConv1d(x, w, { state: zeros([2, 2, 4]) }), /run it under noGrad/);
      w.dispose();
    });
  });
});
