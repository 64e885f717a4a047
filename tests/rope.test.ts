import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ropeInvFreq } from '../src/kernels/rope.ts';
import { randn } from '../src/util/random.ts';
import * as ref from '../src/reference/rope.ts';
import { DTypeError, ShapeError } from '../src/tensor/errors.ts';
import { ropeHeads } from '../src/tensor/ops/rope.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

const slow = { timeout: 300_000 };

// Left-padded position ids the way generate() builds them: cumsum(mask) - 1, clamped at 0.
function paddedPositions(b: number, t: number, pads: number[], start = 0): Int32Array {
  const pos = new Int32Array(b * t);
  for (let i = 0; i < b; i++) for (let j = 0; j < t; j++) pos[i * t + j] = start + Math.max(j - pads[i], 0);
  return pos;
}

/** x [B, H, T, D] as [B, T, H, D]: the layout ropeHeads takes. */
function tokenMajor(x: Float32Array, [b, h, t, d]: readonly number[]): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < b; i++) for (let j = 0; j < h; j++) for (let k = 0; k < t; k++) {
    out.set(x.subarray(((i * h + j) * t + k) * d, ((i * h + j) * t + k + 1) * d), ((i * t + k) * h + j) * d);
  }
  return out;
}

/** ropeHeads of the [B, T, H, D] form of x [B, H, T, D]: the rotated x, [B, H, T, D]. */
const rope = (x: Float32Array, shape: readonly number[], pos: Int32Array, opts: { theta: number; rotaryDim?: number }) =>
  ropeHeads(tensor(tokenMajor(x, shape), [shape[0], shape[2], shape[1], shape[3]]), tensor(pos, [shape[0], shape[2]]), opts);

describe('ropeHeads', () => {
  test('inverse frequencies are rounded like Hugging Face float32', () => {
    for (const [theta, dim] of [[10000, 64], [1e6, 32], [1e6, 128], [1e7, 16]]) {
      assert.deepEqual(ropeInvFreq(theta, dim), ref.invFreq(theta, dim));
    }
    assert.equal(ropeInvFreq(1e6, 32)[0], 1);
  });

  test('forward matches the CPU reference (full and partial rotary, padded positions)', slow, async () => {
    await gpu();
    const cases: { shape: [number, number, number, number]; theta: number; rotaryDim?: number; pads: number[] }[] = [
      { shape: [1, 1, 1, 32], theta: 1e6, pads: [0] },
      { shape: [2, 3, 5, 32], theta: 1e6, pads: [0, 2] },
      { shape: [2, 2, 7, 64], theta: 10000, pads: [3, 0] },
      { shape: [1, 2, 9, 32], theta: 1e7, rotaryDim: 8, pads: [1] },
      { shape: [2, 1, 3, 64], theta: 10000, rotaryDim: 16, pads: [0, 1] },
    ];
    for (const [n, c] of cases.entries()) {
      const [b, h, t, hd] = c.shape;
      const x = randn(b * h * t * hd, 300 + n);
      const pos = paddedPositions(b, t, c.pads);
      await scopeAsync(async () => {
        const y = await read(rope(x, c.shape, pos, { theta: c.theta, rotaryDim: c.rotaryDim }));
        assertClose(y, ref.rope(x, c.shape, pos, c.theta, c.rotaryDim), { atol: 2e-6, rtol: 1e-5, label: `${c.shape} rot ${c.rotaryDim ?? hd}` });
      });
    }
  });

  test('large positions keep cos and sin accurate (angles of thousands of radians)', slow, async () => {
    await gpu();
    const shape: [number, number, number, number] = [2, 1, 6, 64];
    const x = randn(2 * 6 * 64, 321);
    const pos = Int32Array.from([4095, 5000, 8191, 12345, 32000, 40000, 1, 77, 999, 2047, 20000, 30001]);
    await scopeAsync(async () => {
      const y = await read(rope(x, shape, pos, { theta: 10000 }));
      assertClose(y, ref.rope(x, shape, pos, 10000), { atol: 1e-5, rtol: 1e-5, label: 'large positions' });
    });
  });

  test('partial rotary passes the trailing dims through unchanged', slow, async () => {
    await gpu();
    const x = randn(2 * 5 * 32, 331);
    await scopeAsync(async () => {
      const y = await read(rope(x, [1, 2, 5, 32], paddedPositions(1, 5, [0], 3), { theta: 1e6, rotaryDim: 8 }));
      for (let row = 0; row < 10; row++) {
        assert.deepEqual(y.subarray(row * 32 + 8, row * 32 + 32), x.subarray(row * 32 + 8, row * 32 + 32));
      }
    });
  });

  test('backward (rotation by the negative angle, back into the token-major layout) passes finite differences', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const pos = tensor(paddedPositions(2, 5, [0, 2], 10), [2, 5]);
      await gradCheck((x) => ropeHeads(x, pos, { theta: 1e6 }), [{ data: randn(2 * 5 * 3 * 32, 341), shape: [2, 5, 3, 32] }], { probe: 10, label: 'ropeHeads' });
      await gradCheck((x) => ropeHeads(x, pos, { theta: 10000, rotaryDim: 12 }), [{ data: randn(2 * 5 * 1 * 32, 342), shape: [2, 5, 1, 32] }], { probe: 10, label: 'ropeHeads partial' });
    });
  });

  test('bad shapes, dtypes and rotary dims are refused naming the op', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(new Float32Array(2 * 3 * 2 * 8), [2, 3, 2, 8]);
      const pos = tensor(new Int32Array(6), [2, 3]);
      assert.throws(() => ropeHeads(x, tensor(new Int32Array(3), [1, 3]), { theta: 1e4 }), (e: Error) => e instanceof ShapeError && /ropeHeads: positions \[1, 3\] must be \[2, 3\]/.test(e.message));
      assert.throws(() => ropeHeads(x, tensor(new Float32Array(6), [2, 3]), { theta: 1e4 }), (e: Error) => e instanceof DTypeError && /ropeHeads: positions has dtype f32/.test(e.message));
      assert.throws(() => ropeHeads(x, pos, { theta: 1e4, rotaryDim: 10 }), /ropeHeads: rotaryDim 10 must be even and in \[2, 8\]/);
      assert.throws(() => ropeHeads(x, pos, { theta: 1e4, rotaryDim: 3 }), /ropeHeads: rotaryDim 3/);
      assert.throws(() => ropeHeads(tensor(new Float32Array(6), [2, 3]), pos, { theta: 1e4 }), /ropeHeads: x must be \[B, T, H, D\], got \[2, 3\]/);
      assert.throws(() => ropeHeads(x, pos, { theta: 0 }), /ropeHeads: theta must be positive/);
    });
  });
});
