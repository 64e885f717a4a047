// The fused decode kernels (skinny residual / concat / swiglu, qkv_cache) against their
// CPU references, and a Qwen decode loop with the fused layers forced (the software
// GPU would not take them) against the op-by-op layers.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { matmul as matmulKernel } from '../src/kernels/matmul/matmul.ts';
import { matmulSkinnyConcat, matmulSkinnySwiglu, skinnyConcatTakesNorm } from '../src/kernels/matmul/skinny.ts';
import { SKINNY_TILE } from '../src/kernels/matmul/tiles.ts';
import { lastLogits } from '../src/scoring/generate.ts';
import { attachLora } from '../src/lora/lora.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { fusable, fusesStep } from '../src/models/qwen_decode.ts';
import * as ref from '../src/reference/matmul.ts';
import { randn } from '../src/util/random.ts';
import { qkvCache } from '../src/reference/rope.ts';
import { rmsNormForward } from '../src/reference/rmsnorm.ts';
import { swigluForward } from '../src/reference/swiglu.ts';
import { noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { linearConcat, linearResidual, linearSwiglu, ropeQkvCache } from '../src/tensor/ops/decode.ts';
import { keep, scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read, withPolicy } from './support/gpu.ts';
import { tinyQwen } from './support/tiny_qwen.ts';

// Each kernel variant compiles once on the software GPU; that dominates the run time.
const slow = { timeout: 300_000 };

let seed = 900;

describe('fused decode kernels', () => {
  test('skinny with a residual: out = residual + act(x W^T + b), every row block, partial column groups', slow, async () => {
    const rt = await gpu();
    const k = 36;
    for (const [m, n, bias, act] of [[1, 13, true, 'none'], [2, 13, false, 'none'], [3, 9, true, 'silu'], [5, 21, false, 'none'], [8, 13, true, 'none'], [9, 7, true, 'none']] as const) {
      const A = randn(m * k, seed++);
      const W = randn(n * k, seed++);
      const b = bias ? randn(n, seed++) : undefined;
      const R = randn(m * n, seed++);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        matmulKernel(rt, {
          a: tensor(A).buffer, b: tensor(W).buffer, bias: b && tensor(b).buffer, residual: tensor(R).buffer, out: out.buffer,
          m, n, k, transB: true, act, tile: SKINNY_TILE,
        });
        const want = ref.matmul({ a: A, b: W, bias: b, c: R, m, n, k, transB: true, act, accumulate: true });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `residual ${m}x${n} bias ${bias} ${act}` });
      });
    }
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => matmulKernel(rt, { a: t.buffer, b: zeros([64]).buffer, out: zeros([64]).buffer, residual: zeros([64]).buffer, m: 2, n: 2, k: 4, transB: true, tile: '64x64/k8' }),
        /a residual needs the skinny tile, not 64x64\/k8/);
      assert.throws(() => matmulKernel(rt, { a: t.buffer, b: zeros([64]).buffer, out: zeros([64]).buffer, residual: zeros([64]).buffer, m: 2, n: 2, k: 4, transB: true, accumulate: true }),
        /residual and accumulate both add to the result/);
    });
  });

  test('skinny_concat: up to three weights side by side, columns of one weight straddling workgroups, with and without biases', slow, async () => {
    const rt = await gpu();
    const k = 20;
    const cases: [number, number[], boolean][] = [
      [1, [12, 5, 7], true], [2, [13, 3, 3], false], [3, [5, 9], true], [4, [11], true], [7, [3, 10, 6], true], [9, [13, 3, 3], true], [6, [4, 4, 4], false],
      // A 64-episode rollout's decode step: eight row blocks.
      [64, [12, 5, 7], true],
    ];
    for (const [m, ns, bias] of cases) {
      const A = randn(m * k, seed++);
      const Ws = ns.map((n) => randn(n * k, seed++));
      const bs = bias ? ns.map((n) => randn(n, seed++)) : undefined;
      const n = ns.reduce((s, x) => s + x, 0);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        matmulSkinnyConcat(rt, {
          a: tensor(A).buffer, weights: Ws.map((w) => tensor(w).buffer), ns, biases: bs?.map((b) => tensor(b).buffer), out: out.buffer, m, k,
        });
        const stacked = new Float32Array(n * k);
        Ws.reduce((at, w) => (stacked.set(w, at), at + w.length), 0);
        const bias = bs && Float32Array.from(bs.flatMap((b) => [...b]));
        const want = ref.matmul({ a: A, b: stacked, bias, m, n, k, transB: true });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `concat ${m} rows x [${ns}] bias ${bias !== undefined}` });
      });
    }
  });

  test('skinny_concat_norm: rmsNorm then the concatenated projections, with and without biases; refused without a ninth binding', slow, async () => {
    const rt = await gpu();
    assert.ok(skinnyConcatTakesNorm(rt), 'the software GPU offers 16 storage buffers per stage');
    for (const [m, ns, bias, k] of [[1, [12, 5, 7], true, 20], [3, [5, 9], false, 20], [9, [13, 3, 3], true, 36], [64, [12, 5, 7], true, 20], [2, [6, 2, 2], true, 1100]] as const) {
      const A = randn(m * k, seed++).map((v, i) => v * (1 + (i % 5)));
      const Ws = ns.map((n) => randn(n * k, seed++));
      const bs = bias ? ns.map((n) => randn(n, seed++)) : undefined;
      const w = randn(k, seed++);
      const n = ns.reduce((s0, x) => s0 + x, 0);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        matmulSkinnyConcat(rt, {
          a: tensor(A).buffer, weights: Ws.map((x) => tensor(x).buffer), ns, biases: bs?.map((b) => tensor(b).buffer), out: out.buffer, m, k,
          norm: { weight: tensor(w).buffer, eps: 1e-6 },
        });
        const stacked = new Float32Array(n * k);
        Ws.reduce((at, x) => (stacked.set(x, at), at + x.length), 0);
        const want = ref.matmul({ a: rmsNormForward(A, w, 1e-6), b: stacked, bias: bs && Float32Array.from(bs.flatMap((b) => [...b])), m, n, k, transB: true });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `normed concat ${m} rows x [${ns}] k ${k}` });
      });
    }
    const eight = { ...rt, gpu: { ...rt.gpu, limits: { maxStorageBuffersPerShaderStage: 8 } } } as unknown as typeof rt;
    assert.equal(skinnyConcatTakesNorm(eight), false);
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => matmulSkinnyConcat(eight, { a: t.buffer, weights: [t.buffer], ns: [4], out: zeros([64]).buffer, m: 1, k: 4, norm: { weight: t.buffer, eps: 1e-6 } }),
        /needs 9 storage buffers per shader stage, this device offers 8/);
    });
  });

  test('skinny_swiglu: silu(x Wg^T) * (x Wu^T) for 1 to 9 rows and 61', slow, async () => {
    const rt = await gpu();
    const k = 28;
    for (const [m, n] of [[1, 13], [2, 5], [3, 13], [5, 17], [8, 9], [9, 13], [61, 11]]) {
      const A = randn(m * k, seed++);
      const G = randn(n * k, seed++);
      const U = randn(n * k, seed++);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        matmulSkinnySwiglu(rt, { a: tensor(A).buffer, gate: tensor(G).buffer, up: tensor(U).buffer, out: out.buffer, m, n, k });
        const gate = ref.matmul({ a: A, b: G, m, n, k, transB: true });
        const up = ref.matmul({ a: A, b: U, m, n, k, transB: true });
        assertClose(await read(out), swigluForward(gate, up), { atol: 1e-4, rtol: 1e-4, label: `swiglu ${m}x${n}` });
      });
    }
  });

  test('skinny_swiglu with the RMSNorm folded in equals rmsNorm then the products, for 1 to 9 rows, 61 and K past a workgroup', slow, async () => {
    const rt = await gpu();
    for (const [m, n, k] of [[1, 13, 28], [3, 5, 28], [8, 9, 28], [9, 13, 36], [61, 11, 28], [2, 7, 1100]]) {
      const A = randn(m * k, seed++).map((v, i) => v * (1 + (i % 7)));
      const G = randn(n * k, seed++);
      const U = randn(n * k, seed++);
      const w = randn(k, seed++);
      const eps = 1e-6;
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        matmulSkinnySwiglu(rt, { a: tensor(A).buffer, gate: tensor(G).buffer, up: tensor(U).buffer, out: out.buffer, m, n, k, norm: { weight: tensor(w).buffer, eps } });
        const h = rmsNormForward(A, w, eps);
        const gate = ref.matmul({ a: h, b: G, m, n, k, transB: true });
        const up = ref.matmul({ a: h, b: U, m, n, k, transB: true });
        assertClose(await read(out), swigluForward(gate, up), { atol: 1e-4, rtol: 1e-4, label: `normed swiglu ${m}x${n}x${k}` });
      });
    }
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => matmulSkinnySwiglu(rt, { a: t.buffer, gate: t.buffer, up: t.buffer, out: zeros([64]).buffer, m: 1, n: 1, k: 4, norm: { weight: t.buffer, eps: -1 } }), /eps = -1 must be a finite number >= 0/);
      assert.throws(() => noGrad(() => linearSwiglu(zeros([2, 8]), zeros([3, 8]), zeros([3, 8]), { weight: zeros([4]), eps: 1e-6 })), /norm weight \[4\] must be \[8\]/);
    });
  });

  test('qkv_cache: q rotated out, k rotated and v appended to the cache, with and without q/k-norm, partial rotary, heads wider than a workgroup', slow, async () => {
    await gpu();
    const cases = [
      { b: 3, t: 1, hq: 4, hkv: 2, hd: 16, capacity: 9, offset: 5, qkNorm: false },
      { b: 3, t: 1, hq: 4, hkv: 2, hd: 16, capacity: 9, offset: 0, qkNorm: true },
      { b: 2, t: 3, hq: 3, hkv: 1, hd: 12, capacity: 7, offset: 4, qkNorm: true, rotaryDim: 4 },
      { b: 1, t: 2, hq: 2, hkv: 1, hd: 160, capacity: 3, offset: 1, qkNorm: true },
      { b: 2, t: 1, hq: 2, hkv: 2, hd: 96, capacity: 4, offset: 3, qkNorm: false, rotaryDim: 32 },
    ];
    for (const c of cases) {
      const rows = c.b * c.t;
      const qkv = randn(rows * (c.hq + 2 * c.hkv) * c.hd, seed++);
      const positions = Int32Array.from({ length: rows }, (_, i) => (i * 7 + c.offset) % 11);
      const cacheSize = c.b * c.hkv * c.capacity * c.hd;
      const keys = randn(cacheSize, seed++);
      const values = randn(cacheSize, seed++);
      const norm = c.qkNorm ? { q: randn(c.hd, seed++, 0.5).map((x) => x + 1), k: randn(c.hd, seed++, 0.5).map((x) => x + 1), eps: 1e-6 } : undefined;
      const want = qkvCache({ ...c, qkv, positions, keys, values, theta: 10000, qkNorm: norm });
      await scopeAsync(async () => {
        const cache = [c.b, c.hkv, c.capacity, c.hd];
        const kt = tensor(keys, cache);
        const vt = tensor(values, cache);
        const q = ropeQkvCache(tensor(qkv, [c.b, c.t, (c.hq + 2 * c.hkv) * c.hd]), tensor(positions, [c.b, c.t]), kt, vt, c.offset, {
          heads: c.hq, kvHeads: c.hkv, headDim: c.hd, theta: 10000, rotaryDim: c.rotaryDim,
          qkNorm: norm && { q: tensor(norm.q), k: tensor(norm.k), eps: norm.eps },
        });
        assert.deepEqual(q.shape, [c.b, c.hq, c.t, c.hd]);
        const label = JSON.stringify(c);
        assertClose(await read(q), want.q, { atol: 1e-5, rtol: 1e-4, label: `q ${label}` });
        assertClose(await read(kt), want.keys, { atol: 1e-5, rtol: 1e-4, label: `keys ${label}` });
        assertClose(await read(vt), want.values, { atol: 0, rtol: 0, label: `values ${label}` });
      });
    }
  });

  test('the fused ops are inference only and check their shapes', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(randn(2 * 8, seed++), [2, 8]);
      const w = requireGrad(tensor(randn(4 * 8, seed++), [4, 8]));
      assert.throws(() => linearConcat(x, [w]), /linearConcat: inference only/);
      assert.throws(() => linearSwiglu(x, w, w), /linearSwiglu: inference only/);
      assert.throws(() => linearResidual(x, w, null, zeros([2, 4])), /linearResidual: inference only/);
      noGrad(() => {
        assert.throws(() => linearConcat(x, [w, w, w, w]), /1 to 3 weights/);
        assert.throws(() => linearConcat(x, [w], [zeros([3])]), /biases \[3\] do not match weights of 4 rows/);
        assert.throws(() => linearConcat(tensor(randn(6, 1), [2, 3]), [zeros([4, 3])]), /in = 3 must be a multiple of 4/);
        assert.throws(() => linearSwiglu(x, w, zeros([5, 8])), /gate \[4, 8\] and up \[5, 8\] differ/);
        assert.throws(() => linearResidual(x, w, null, zeros([2, 5])), /residual \[2, 5\] must be \[2, 4\]/);
        const qkv = zeros([1, 1, 4 * 4]);
        const cache = zeros([1, 1, 2, 4]);
        const pos = tensor(Int32Array.of(0), [1, 1], 'i32');
        assert.throws(() => ropeQkvCache(qkv, pos, cache, cache, 2, { heads: 2, kvHeads: 1, headDim: 4, theta: 1e4 }), /tokens 2\.\.3 do not fit the cache/);
        assert.throws(() => ropeQkvCache(qkv, pos, cache, cache, 0, { heads: 1, kvHeads: 1, headDim: 4, theta: 1e4 }), /qkv must be \[B, T, 12\]/);
      });
    });
  });
});

/** Logits of the prefill and `ids.length` decode steps of 3 left-padded rows, and the dispatches of the last step. */
async function decode(model: QwenModel, ids: number[][], fused: 'always' | 'never'): Promise<{ logits: Float32Array[]; dispatches: number }> {
  const rt = await gpu();
  const prompts = [[5, 9, 13, 2, 40, 41], [7, 8, 90, 3], [1, 2]];
  const B = prompts.length;
  const P = 6;
  const padLeft = Int32Array.from(prompts, (p) => P - p.length);
  const input = new Int32Array(B * P);
  prompts.forEach((p, b) => input.set(p, b * P + padLeft[b]));
  const cache = model.newCache(B, P + ids.length, padLeft);
  try {
    return await withPolicy(rt, { decode: { fused } }, async () => {
      const logits: Float32Array[] = [];
      let dispatches = 0;
      const step = (tokens: Int32Array, seq: number) => scopeAsync(async () => {
        const start = rt.dispatchCount;
        const out = noGrad(() => lastLogits(model, model.hiddenCached({ ids: tokens, batch: B, seq }, cache)));
        dispatches = rt.dispatchCount - start;
        logits.push(await read(out));
      });
      await step(input, P);
      for (const row of ids) await step(Int32Array.from(row), 1);
      return { logits, dispatches };
    });
  } finally {
    cache.dispose();
  }
}

describe('fused Qwen decode steps', () => {
  const steps = [[3, 50, 17], [96, 0, 4], [12, 12, 60], [33, 71, 8]];

  async function compare(model: QwenModel, label: string): Promise<void> {
    const plain = await decode(model, steps, 'never');
    const fused = await decode(model, steps, 'always');
    plain.logits.forEach((want, i) => assertClose(fused.logits[i], want, { atol: 1e-4, rtol: 1e-4, label: `${label} step ${i}` }));
    assert.ok(fused.dispatches < plain.dispatches, `${label}: ${fused.dispatches} dispatches fused, ${plain.dispatches} op by op`);
  }

  test('Qwen2 with q/k/v biases: 4 steps of batch 3 with left padding equal the op-by-op layers', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 48, intermediate_size: 52, num_attention_heads: 3, num_key_value_heads: 1 }, 3);
    await compare(model, 'qwen2');
    for (const p of model.parameters()) p.dispose();
  });

  test('above foldNormMaxRows the RMSNorms keep their own dispatches, one more per norm, and the steps are unchanged', slow, async () => {
    const rt = await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 48, intermediate_size: 52, num_attention_heads: 3, num_key_value_heads: 1 }, 7);
    try {
      const folded = await decode(model, steps, 'always');
      const unfolded = await withPolicy(rt, { decode: { foldNormMaxRows: 2 } }, () => decode(model, steps, 'always'));
      folded.logits.forEach((want, i) => assertClose(unfolded.logits[i], want, { atol: 1e-4, rtol: 1e-4, label: `unfolded norms, step ${i}` }));
      // Per layer of the last step: the MLP's norm, and the attention's where it was folded.
      const norms = model.config.layers * (skinnyConcatTakesNorm(rt) ? 2 : 1);
      assert.equal(unfolded.dispatches, folded.dispatches + norms, `${unfolded.dispatches} dispatches unfolded, ${folded.dispatches} folded`);
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });

  test('Qwen3 with q/k-norm and attention biases (o_proj too)', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen3-0.6b', { hidden_size: 32, intermediate_size: 36, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 12, attention_bias: true }, 4);
    assert.ok(model.config.qkNorm && model.config.outputBias);
    await compare(model, 'qwen3');
    for (const p of model.parameters()) p.dispose();
  });

  test('blocks with a LoRA branch keep the op-by-op form; the others fuse', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 32, intermediate_size: 40, num_attention_heads: 2, num_key_value_heads: 1 }, 5);
    attachLora(model, { r: 2, alpha: 4, targetModules: ['v_proj'], baseModel: null }, 1);
    // A non-zero B, so that leaving the branch out would show.
    for (const branch of model.lora.values()) {
      const b = keep(tensor(randn(branch.b.size, seed++, 0.3), branch.b.shape));
      branch.b.dispose();
      branch.b = b;
    }
    assert.equal(fusable(model, 0, 'attention'), false);
    assert.equal(fusable(model, 0, 'mlp'), true);
    await compare(model, 'lora on v_proj');
    for (const p of [...model.parameters(), ...[...model.lora.values()].flatMap((b) => [b.a, b.b])]) p.dispose();
  });

  test('when steps fuse: decode steps under noGrad with a cache, where the skinny path would be taken', slow, async () => {
    const rt = await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 32, intermediate_size: 40, num_attention_heads: 2, num_key_value_heads: 1 }, 6);
    const cache = model.newCache(2, 4);
    const compatibility = rt.caps.compatibility;
    try {
      // As on a real GPU.
      rt.gpu.caps.compatibility = false;
      assert.equal(noGrad(() => fusesStep(model, 2, 1, cache)), true);
      assert.equal(noGrad(() => fusesStep(model, 2, 2, cache)), false, 'prefill');
      assert.equal(noGrad(() => fusesStep(model, 2, 1, null)), false, 'no cache');
      assert.equal(fusesStep(model, 2, 1, cache), false, 'gradients enabled');
      const many = rt.policy.matmul.skinnyMaxRowsNarrow + 1;
      assert.equal(noGrad(() => fusesStep(model, many, 1, cache)), true, 'weights this small fuse at any row count');
      await withPolicy(rt, { decode: { fusedAnyRowsMaxBytes: 4 * 40 * 32 - 1 } }, () => {
        assert.equal(noGrad(() => fusesStep(model, many, 1, cache)), false, 'too many rows for the skinny path, a weight (gate, 40 x 32) over the bound');
        assert.equal(noGrad(() => fusesStep(model, 2, 1, cache)), true, 'a few rows still fuse');
      });
      rt.gpu.caps.compatibility = true;
      assert.equal(noGrad(() => fusesStep(model, 2, 1, cache)), false, 'the software GPU');
    } finally {
      rt.gpu.caps.compatibility = compatibility;
      cache.dispose();
      for (const p of model.parameters()) p.dispose();
    }
  });
});
