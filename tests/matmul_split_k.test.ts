import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import type { Runtime } from '../src/gpu/runtime.ts';
import type { MatmulArgs } from '../src/kernels/matmul/args.ts';
import { matmul as matmulKernel } from '../src/kernels/matmul/matmul.ts';
import { MATMUL_TILES } from '../src/kernels/matmul/tiles.ts';
import { gradientMatmuls } from '../src/kernels/matmul/precision.ts';
import { matmulSplitK, planSplitK, planStreamK, splitKApplies, splitRuns, tensorSplitTargets } from '../src/kernels/matmul/split_k.ts';
import * as ref from '../src/reference/matmul.ts';
import { randn } from '../src/util/random.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read, withPolicy } from './support/gpu.ts';

const slow = { timeout: 300_000 };
// The planners under the default policy (fitted to the H200).
const defaults = kernelPolicy();
const tensorTargets = tensorSplitTargets(defaults.splitK);
// Products route through split-K only on a real GPU (bench GPU runs take it to the H200).
const realGpu = !(await gpu()).caps.compatibility;

describe('split-K weight-gradient products', () => {
  test('the f32 kernel cuts k into runs of small outputs, at least eight, more for tiny ones', () => {
    // The bundled model's dW (256 x 256 over a 32,768-token micro-batch): 4 tiles.
    assert.equal(splitRuns(256, 256, 32768, defaults.splitK), 64);
    // Qwen2.5-0.5B at 8 x 512 tokens: the MLP's dW, the LM head's dW per vocabulary
    // chunk, the MLP's forward down projection, a k/v projection's dW.
    assert.equal(splitRuns(4864, 896, 4096, defaults.splitK), 8);
    assert.equal(splitRuns(8192, 896, 4096, defaults.splitK), 8);
    assert.equal(splitRuns(4096, 896, 4864, defaults.splitK), 8);
    assert.equal(splitRuns(128, 896, 4096, defaults.splitK), 8, 'capped by the 512-k run floor');
    // An output of four waves or more, and a k too short to cut, stay whole.
    assert.equal(splitRuns(4096, 4096, 4096, defaults.splitK), 1);
    assert.equal(splitRuns(4096, 4864, 896, defaults.splitK), 1);
    assert.equal(splitRuns(256, 256, 1000, defaults.splitK), 1);
  });

  test('stream-K takes outputs under one round of workgroups and last rounds that leave the GPU idle', () => {
    assert.equal(defaults.streamK.multiprocessors, 132);
    // Qwen2.5-0.5B at 4096 tokens: 4096 x 896 outputs (224 tiles of 128x128, two per
    // multiprocessor) and the MLP's 4096 x 4864 on the wide tile (one per
    // multiprocessor: four rounds of 132, then 80 tiles).
    assert.deepEqual(planStreamK(224, 304, 2, defaults.streamK), { tiles: 224, shares: 264 });
    assert.deepEqual(planStreamK(608, 56, 1, defaults.streamK), { tiles: 80, shares: 132 });
    // The bundled model's dW: four tiles over k = 32,768.
    assert.deepEqual(planStreamK(4, 2048, 2, defaults.streamK), { tiles: 4, shares: 264 });
    // 4096^3 on the wide tile: a last round of 124 of 132 stays whole; so do full rounds.
    assert.equal(planStreamK(256, 256, 1, defaults.streamK), undefined);
    assert.equal(planStreamK(264, 256, 2, defaults.streamK), undefined);
    // Too few slices for shares longer than minShareSlices, more of them than tiles.
    assert.equal(planStreamK(4, 4, 2, defaults.streamK), undefined);
    // Shares not short enough to pay for themselves: the MLP's 4096 x 4864 on 128x128
    // (four rounds of 264, then 160 tiles of 56 slices in shares of 34), and 36 tiles of
    // 17 slices over 38 shares.
    assert.equal(planStreamK(1216, 56, 2, defaults.streamK), undefined);
    assert.equal(planStreamK(300, 17, 1, defaults.streamK), undefined);
    for (const [tiles, slices, resident] of [[7, 100, 2], [300, 64, 1], [1, 16 * 40, 8]]) {
      const plan = planStreamK(tiles, slices, resident, defaults.streamK);
      assert.ok(plan, `${tiles} tiles of ${slices} slices`);
      assert.ok(plan.shares > plan.tiles && Math.ceil((plan.tiles * slices) / plan.shares) <= slices, 'a share spans at most one tile');
      assert.ok(plan.shares <= defaults.streamK.multiprocessors * resident);
    }
  });

  test('the batched chunks (tensor-core kernel) cover k exactly, only for small outputs', () => {
    assert.deepEqual(planSplitK(256, 256, 32768, tensorTargets), { chunks: 64, kc: 512, full: 64, rest: 0 });
    assert.equal(planSplitK(128, 896, 4096, tensorTargets).chunks, 8);
    // The MLP's dW fills the tensor-core kernel's smaller target whole.
    assert.equal(planSplitK(4864, 896, 4096, tensorTargets).chunks, 1);
    assert.equal(planSplitK(4864, 896, 4096, { ...tensorTargets, targetWorkgroups: 1024 }).chunks, 4);
    assert.equal(planSplitK(8192, 8192, 4096, tensorTargets).chunks, 1);
    assert.equal(planSplitK(256, 256, 1000, tensorTargets).chunks, 1);
    for (const [m, n, k] of [[256, 256, 32767], [100, 60, 5000], [8, 8, 1041], [896, 896, 4100]]) {
      const p = planSplitK(m, n, k, tensorTargets);
      assert.equal(p.kc % 16, 0, `kc ${p.kc} for k ${k}`);
      assert.equal(p.full * p.kc + p.rest, k, `chunks cover k = ${k}`);
      assert.ok(p.rest < p.kc && p.chunks <= defaults.splitK.maxChunks && p.chunks === p.full + (p.rest > 0 ? 1 : 0));
      if (p.chunks > 1) assert.ok(p.kc >= defaults.splitK.minChunk - 16, `chunk ${p.kc} of k ${k}`);
    }
  });

  test('only the weight-gradient layout with a plain epilogue splits, and never on the software GPU', () => {
    const real = { caps: { compatibility: false } } as Runtime;
    const dw: MatmulArgs = { a: {} as GPUBuffer, b: {} as GPUBuffer, out: {} as GPUBuffer, m: 64, n: 64, k: 8192, transA: true };
    assert.equal(splitKApplies(real, dw), true);
    assert.equal(splitKApplies({ caps: { compatibility: true } } as Runtime, dw), false);
    for (const change of [{ transA: false }, { transB: true }, { batch: 2 }, { accumulate: true }, { bias: {} as GPUBuffer }, { act: 'silu' as const }, { offsetC: 4 }, { tile: '64x64/k8' as const }]) {
      assert.equal(splitKApplies(real, { ...dw, ...change }), false, JSON.stringify(Object.keys(change)));
    }
  });

  test('the partial sums add up to the whole product (chunks with and without a shorter last one, both kernels)', slow, async () => {
    const rt = await gpu();
    const policy = { targetWorkgroups: 8, minChunk: 16, maxChunks: 5 };
    let seed = 900;
    for (const [m, n, k] of [[12, 20, 96], [9, 6, 101], [16, 8, 80]]) {
      const plan = planSplitK(m, n, k, policy);
      assert.ok(plan.chunks > 1, `${m}x${n}x${k} splits`);
      const A = randn(k * m, seed++);
      const B = randn(k * n, seed++);
      const want = ref.matmul({ a: A, b: B, m, n, k, transA: true });
      for (const tile of ['64x64/k8', undefined] as const) {
        await scopeAsync(async () => {
          const out = zeros([m * n]);
          const run = (args: MatmulArgs) => matmulKernel(rt, { ...args, tile });
          matmulSplitK(rt, { a: tensor(A).buffer, b: tensor(B).buffer, out: out.buffer, m, n, k, transA: true }, plan, run);
          assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `${m}x${n}x${k} in ${plan.chunks} chunks (rest ${plan.rest}), tile ${tile ?? 'auto'}` });
        });
      }
    }
  });

  test('a weight gradient through gradientMatmuls splits on a real GPU and equals the reference (f32, then tensor cores)', { skip: realGpu ? false : 'split-K runs on real GPUs only', timeout: 300_000 }, async () => {
    const rt = await gpu();
    const [m, n, k] = [64, 96, 8192];
    assert.ok(splitRuns(m, n, k, defaults.splitK) > 1 && planSplitK(m, n, k, tensorTargets).chunks > 1);
    const A = randn(k * m, 950);
    const B = randn(k * n, 951);
    const want = ref.matmul({ a: A, b: B, m, n, k, transA: true });
    for (const gradients of [false, true]) {
      await withPolicy(rt, { tensorCores: { gradients, minMacs: 0 } }, () => scopeAsync(async () => {
        const a = tensor(A);
        const out = zeros([m * n]);
        gradientMatmuls(rt, a.buffer, k * m, [{ a: a.buffer, b: tensor(B).buffer, out: out.buffer, m, n, k, transA: true }]);
        // f16 operands (tensor cores, where the device has them) round each input to 11 bits.
        assertClose(await read(out), want, { atol: gradients ? 0.5 : 2e-3, rtol: gradients ? 5e-3 : 1e-4, label: `dW ${m}x${n}x${k}, gradient tensor cores ${gradients}` });
      }));
    }
  });

  test('on a real GPU the launcher streams small outputs of every layout and epilogue (stream-K), and reports the cut', { skip: realGpu ? false : 'stream-K and split-K run on real GPUs only', timeout: 300_000 }, async () => {
    const rt = await gpu();
    // More rows than the skinny path takes (B transposed, policy.matmul.skinnyMaxRowsNarrow):
    // four 64x64 tiles of 512 slices, far under one round of workgroups.
    const [m, n, k] = [72, 96, 4096];
    const stream = planStreamK(4, k / 8, MATMUL_TILES['64x64/k8'].resident, defaults.streamK);
    assert.ok(stream && stream.tiles === 4);
    const A = randn(m * k, 960);
    const B = randn(k * n, 961);
    const bias = randn(n, 962);
    for (const [transA, transB] of [[false, true], [false, false], [true, false]] as const) {
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        const args = { a: tensor(A).buffer, b: tensor(B).buffer, bias: tensor(bias).buffer, out: out.buffer, m, n, k, transA, transB, act: 'silu' as const };
        assert.deepEqual(matmulKernel(rt, args), { runs: 1, stream }, `layout ${transA ? 't' : 'n'}${transB ? 't' : 'n'}`);
        const want = ref.matmul({ a: A, b: B, m, n, k, transA, transB, bias, act: 'silu' });
        assertClose(await read(out), want, { atol: 1e-3, rtol: 1e-4, label: `streamed ${transA ? 't' : 'n'}${transB ? 't' : 'n'} with bias and silu` });
      });
    }
    // Runs asked for are runs.
    await scopeAsync(async () => {
      const out = zeros([m * n]);
      assert.deepEqual(matmulKernel(rt, { a: tensor(A).buffer, b: tensor(B).buffer, out: out.buffer, m, n, k, splitK: 4 }), { runs: 4 }, 'runs asked for');
      assertClose(await read(out), ref.matmul({ a: A, b: B, m, n, k }), { atol: 1e-3, rtol: 1e-4, label: 'split plain output' });
    });
    // The wide tile's plain output, 96 tiles (under one round of 132): streamed whole-tile
    // shares on main_origins' tile.
    await scopeAsync(async () => {
      const [wm, wn, wk] = [8 * 128, 12 * 256, 2048];
      assert.ok(rt.policy.matmul.wideMinWorkgroups <= 96);
      assert.ok(planStreamK(96, wk / 16, 1, defaults.streamK));
      const WA = randn(wm * wk, 963);
      const WB = randn(wk * wn, 964);
      const wide = zeros([wm * wn]);
      assert.deepEqual(matmulKernel(rt, { a: tensor(WA).buffer, b: tensor(WB).buffer, out: wide.buffer, m: wm, n: wn, k: wk }), { runs: 1, stream: planStreamK(96, wk / 16, 1, defaults.streamK) }, 'wide plain output');
      assertClose(await read(wide), ref.matmul({ a: WA, b: WB, m: wm, n: wn, k: wk }), { atol: 1e-3, rtol: 1e-4, label: 'streamed wide output' });
    });
  });
});
