// Autotuned matmul tiles (policy.matmul.tiles 'autotune'): the first product of a class
// runs on the rules' tile and queues a measurement, which the next sync runs; later
// products take the measured tile, once per class, and their results stay right.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gpuOptions } from '../src/cli/gpu_args.ts';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import type { MatmulArgs } from '../src/kernels/matmul/args.ts';
import { matmulTuneKey, tileCandidates } from '../src/kernels/matmul/autotune.ts';
import { matmul } from '../src/kernels/matmul/matmul.ts';
import { autoTile } from '../src/kernels/matmul/select.ts';
import { SKINNY_TILE } from '../src/kernels/matmul/tiles.ts';
import * as ref from '../src/reference/matmul.ts';
import { randn } from '../src/util/random.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read, withPolicy } from './support/gpu.ts';

describe('autotuned matmul tiles', () => {
  test('a class is measured once at the next sync, its winner is a candidate, and products on it are right', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    const [m, n, k] = [37, 45, 70];
    const A = randn(m * k, 1201);
    const B = randn(n * k, 1202);
    const bias = randn(n, 1203);
    const want = ref.matmul({ a: A, b: B, m, n, k, transB: true, bias, act: 'silu' });
    await withPolicy(rt, { matmul: { tiles: 'autotune' } }, () => scopeAsync(async () => {
      const args = (out: GPUBuffer): MatmulArgs => ({ a: tensor(A).buffer, b: tensor(B).buffer, bias: tensor(bias).buffer, out, m, n, k, transB: true, act: 'silu' });
      const first = zeros([m * n]);
      const key = matmulTuneKey(args(first.buffer));
      const candidates = tileCandidates(rt, args(first.buffer), autoTile(rt, args(first.buffer)));
      assert.ok(candidates.length > 1, `candidates ${candidates.join(', ')}`);
      const measured = rt.autotune.measured;
      matmul(rt, args(first.buffer));
      assert.equal(rt.autotune.winner(key), undefined, 'nothing is measured while recording');
      assert.equal(rt.autotune.pending, 1);
      await rt.sync();
      assert.equal(rt.autotune.measured, measured + 1);
      const winner = rt.autotune.winner(key);
      assert.ok(winner && candidates.includes(winner as never), `winner ${winner} among ${candidates.join(', ')}`);
      assertClose(await read(first), want, { atol: 1e-4, rtol: 1e-4, label: 'on the rules\' tile' });
      for (let i = 0; i < 2; i++) {
        const out = zeros([m * n]);
        matmul(rt, args(out.buffer));
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `on the measured ${winner}` });
      }
      assert.equal(rt.autotune.measured, measured + 1, 'a class is measured once');
      assert.equal(rt.autotune.pending, 0);
    }));
  });

  test('classes differ by layout and epilogue; a residual has only the skinny kernel, so nothing to measure', async () => {
    const rt = await gpu();
    const base = { a: {} as GPUBuffer, b: {} as GPUBuffer, out: {} as GPUBuffer, m: 4, n: 64, k: 32 };
    const keys = [base, { ...base, transB: true }, { ...base, bias: {} as GPUBuffer }, { ...base, offsetA: 2 }, { ...base, m: 5 }].map(matmulTuneKey);
    assert.equal(new Set(keys).size, keys.length, keys.join(' | '));
    const residual = { ...base, transB: true, residual: {} as GPUBuffer };
    assert.deepEqual(tileCandidates(rt, residual, SKINNY_TILE), [SKINNY_TILE]);
  });

  test('--matmul-tiles sets the policy; rules by default; anything else is refused', () => {
    assert.equal(kernelPolicy(gpuOptions({ 'matmul-tiles': 'autotune' }).policy).matmul.tiles, 'autotune');
    assert.equal(kernelPolicy(gpuOptions({}).policy).matmul.tiles, 'rules');
    assert.throws(() => gpuOptions({ 'matmul-tiles': 'fastest' }), /--matmul-tiles must be rules or autotune, got "fastest"/);
  });
});
