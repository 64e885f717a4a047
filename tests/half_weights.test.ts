// f16 copies of weights for decoding: the packing kernel and the skinny f16 kernels
// against their CPU references, the fused Qwen decode steps reading the copies against
// the same steps over weights rounded to f16 beforehand, and LocalEngine's f16 path
// (rt.policy.decode.weights) against the f32 one, including copies refreshed after
// the weights change, and the rollout-to-trainer gap a training run logs with each.
// unpack2x16float needs no shader-f16, so all of it runs on the software GPU.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../src/config/config.ts';
import { packF16 } from '../src/kernels/half.ts';
import { matmulSkinnyConcat, matmulSkinnyHalf, matmulSkinnySwiglu } from '../src/kernels/matmul/skinny.ts';
import { tensorMatmulMissing } from '../src/kernels/matmul/tensor.ts';
import { lastLogits } from '../src/scoring/generate.ts';
import { f16ToF32, f32ToF16 } from '../src/util/half.ts';
import { HalfWeights } from '../src/models/half_weights.ts';
import { attachLora } from '../src/lora/lora.ts';
import { randomModel } from '../src/models/load.ts';
import { configFromPreset } from '../src/hf_model/presets.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { decodeWeightNames, stackedQkvNames } from '../src/models/qwen_decode.ts';
import * as ref from '../src/reference/matmul.ts';
import { F16_MAX, packedF16, roundArrayToF16 } from '../src/reference/matmul_f16.ts';
import { rmsNormForward } from '../src/reference/rmsnorm.ts';
import { swigluForward } from '../src/reference/swiglu.ts';
import type { GenerationRequest } from '../src/engines/engine.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { noGrad } from '../src/tensor/autograd.ts';
import { linearConcat, linearResidual, linearDecode } from '../src/tensor/ops/decode.ts';
import { halfWeight } from '../src/tensor/ops/half.ts';
import { keep, scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { train } from '../src/trainer/train.ts';
import { randn } from '../src/util/random.ts';
import { assertClose, gpu, read, withPolicy } from './support/gpu.ts';
import { tinyHouseholdModel } from './support/tiny_household.ts';

const slow = { timeout: 300_000 };

let seed = 4100;

/** The f16 values of a packed copy read back. */
async function unpacked(t: { toArray(): Promise<ArrayLike<number>> }): Promise<Float32Array> {
  const words = Uint32Array.from(await t.toArray());
  return f16ToF32(new Uint16Array(words.buffer));
}

describe('f16 weight kernels', () => {
  test('pack_f16 rounds to the nearest f16 (ties to even) and clamps to its range, as the checkpoint encoder does', slow, async () => {
    const rt = await gpu();
    const halfway = [1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -24 * 1.5, 2 ** -24 * 2.5, -(1 + 2 ** -11)];
    const edges = [0, -0, 65504, 65519, 65520, 1e6, -1e6, 2 ** -25, 2 ** -26, 6.1e-5, -3.0e-8];
    const values = Float32Array.from([...halfway, ...edges, ...randn(200, seed++, 3), ...randn(40, seed++, 1e-5), ...randn(40, seed++, 3e4)]);
    if (values.length % 2) throw new Error('an even count');
    const got = await scopeAsync(async () => {
      const out = zeros([values.length / 2], 'u32');
      packF16(rt, tensor(values).buffer, out.buffer, values.length);
      return unpacked(out);
    });
    const want = packedF16(values);
    assert.deepEqual([...got].map((v) => (Object.is(v, -0) ? 0 : v)), [...want].map((v) => (Object.is(v, -0) ? 0 : v)));
    const clamped = values.map((v) => Math.min(F16_MAX, Math.max(-F16_MAX, v)));
    assert.deepEqual([...got], [...f16ToF32(f32ToF16(clamped))], 'the same values as util/half.ts encodes');
    assert.throws(() => packF16(rt, tensor(values).buffer, tensor(values).buffer, 3), /n = 3 must be an even count/);
  });

  test('skinny f16: x W^T (+ bias, + residual) with W read as f16 pairs equals the f32 product over the rounded W', slow, async () => {
    const rt = await gpu();
    const k = 36;
    for (const [m, n, bias, resid] of [[1, 13, true, true], [2, 9, false, false], [5, 21, true, false], [9, 7, false, true]] as const) {
      const A = randn(m * k, seed++);
      const W = randn(n * k, seed++);
      const b = bias ? randn(n, seed++) : undefined;
      const R = resid ? randn(m * n, seed++) : undefined;
      await scopeAsync(async () => {
        const h = halfWeight(tensor(W, [n, k]));
        const out = zeros([m * n]);
        matmulSkinnyHalf(rt, {
          a: tensor(A).buffer, b: h.packed.buffer, bias: b && tensor(b).buffer, residual: R && tensor(R).buffer, out: out.buffer,
          m, n, k, offsetA: 0, offsetB: 0, offsetC: 0, act: 'none', accumulate: false,
        });
        const want = ref.matmul({ a: A, b: packedF16(W), bias: b, c: R, m, n, k, transB: true, accumulate: !!R });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `f16 skinny ${m}x${n} bias ${bias} residual ${resid}` });
        h.packed.dispose();
      });
    }
  });

  test('skinny_concat and skinny_swiglu with f16 weights, RMSNorm folded in or not', slow, async () => {
    const rt = await gpu();
    const k = 20;
    for (const [m, ns, norm] of [[1, [12, 5, 7], false], [3, [5, 9], true], [9, [13, 3, 3], true]] as const) {
      const A = randn(m * k, seed++).map((v, i) => v * (1 + (i % 3)));
      const Ws = ns.map((n) => randn(n * k, seed++));
      const bs = ns.map((n) => randn(n, seed++));
      const w = randn(k, seed++);
      const n = ns.reduce((s, x) => s + x, 0);
      await scopeAsync(async () => {
        const halves = Ws.map((x, i) => halfWeight(tensor(x, [ns[i], k])));
        const out = zeros([m * n]);
        matmulSkinnyConcat(rt, {
          a: tensor(A).buffer, weights: halves.map((h) => h.packed.buffer), ns, biases: bs.map((b) => tensor(b).buffer), out: out.buffer, m, k,
          norm: norm ? { weight: tensor(w).buffer, eps: 1e-6 } : undefined, half: true,
        });
        const stacked = new Float32Array(n * k);
        Ws.reduce((at, x) => (stacked.set(packedF16(x), at), at + x.length), 0);
        const want = ref.matmul({ a: norm ? rmsNormForward(A, w, 1e-6) : A, b: stacked, bias: Float32Array.from(bs.flatMap((b) => [...b])), m, n, k, transB: true });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `f16 concat ${m} rows x [${ns}] norm ${norm}` });
        for (const h of halves) h.packed.dispose();
      });
    }
    for (const [m, n, norm] of [[1, 13, false], [3, 5, true], [9, 13, true]] as const) {
      const A = randn(m * k, seed++);
      const G = randn(n * k, seed++);
      const U = randn(n * k, seed++);
      const w = randn(k, seed++);
      await scopeAsync(async () => {
        const [g, u] = [halfWeight(tensor(G, [n, k])), halfWeight(tensor(U, [n, k]))];
        const out = zeros([m * n]);
        matmulSkinnySwiglu(rt, { a: tensor(A).buffer, gate: g.packed.buffer, up: u.packed.buffer, out: out.buffer, m, n, k, norm: norm ? { weight: tensor(w).buffer, eps: 1e-6 } : undefined, half: true });
        const h = norm ? rmsNormForward(A, w, 1e-6) : A;
        const gate = ref.matmul({ a: h, b: packedF16(G), m, n, k, transB: true });
        const up = ref.matmul({ a: h, b: packedF16(U), m, n, k, transB: true });
        assertClose(await read(out), swigluForward(gate, up), { atol: 1e-4, rtol: 1e-4, label: `f16 swiglu ${m}x${n} norm ${norm}` });
        g.packed.dispose();
        u.packed.dispose();
      });
    }
  });

  test('the ops take f16 copies and refuse a mix of kinds, and copies need an even row length', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(randn(2 * 8, seed++), [2, 8]);
      const W = randn(4 * 8, seed++);
      const w = tensor(W, [4, 8]);
      const h = halfWeight(w);
      noGrad(() => {
        assert.throws(() => linearConcat(x, [w, h]), /linearConcat: weights mix f32 tensors and f16 copies/);
        assert.throws(() => linearResidual(x, h, null, zeros([2, 5])), /residual \[2, 5\] must be \[2, 4\]/);
        assert.throws(() => linearDecode(tensor(randn(6, 1), [2, 3]), h), /weights must be \[out, 3\]/);
      });
      const y = noGrad(() => linearDecode(x, h));
      assertClose(await read(y), ref.matmul({ a: await read(x), b: packedF16(W), m: 2, n: 4, k: 8, transB: true }), { atol: 1e-5, label: 'linearDecode' });
      assert.deepEqual([...(await unpacked(h.packed))], [...packedF16(W)]);
      assert.throws(() => halfWeight(tensor(randn(9, 1), [3, 3])), /halfWeight: weight \[3, 3\] is not \[rows, cols\] with an even number of columns/);
      h.packed.dispose();
    });
  });
});

/** A copy of `model` whose decode weights (the ones HalfWeights copies) are rounded to f16 in f32. */
async function roundedTwin(model: QwenModel): Promise<QwenModel> {
  const twin = randomModel(model.config, 1, { trainable: false });
  for (const [name, t] of model.params) {
    const data = Float32Array.from(await t.toArray());
    const fresh = keep(tensor(decodeWeightNames(model).includes(name) ? packedF16(data) : data, t.shape));
    twin.params.get(name)!.dispose();
    twin.params.set(name, fresh);
  }
  return twin;
}

const tiny = (s: number, shapes: Record<string, number> = {}) => randomModel(configFromPreset('qwen2.5-0.5b', {
  vocab_size: 97, num_hidden_layers: 2, hidden_size: 32, intermediate_size: 44, num_attention_heads: 2, num_key_value_heads: 1, tie_word_embeddings: false, ...shapes,
}), s, { std: 0.3, trainable: false });

describe('f16 decode weights', () => {
  test('fused decode steps reading the f16 copies equal the same steps over weights rounded to f16', slow, async () => {
    const rt = await gpu();
    const model = tiny(11);
    const twin = await roundedTwin(model);
    const half = HalfWeights.of(model);
    try {
      // Two bytes a weight; the q|k|v biases stacked once more in f32, four bytes each.
      const qkvBiases = Array.from({ length: model.config.layers }, (_, l) => stackedQkvNames(model, l).biases).flat();
      assert.equal(half.bytes, decodeWeightNames(model).reduce((n, name) => n + 2 * model.param(name).size, 0) + qkvBiases.reduce((n, name) => n + 4 * model.param(name).size, 0));
      await withPolicy(rt, { decode: { fused: 'always' } }, async () => {
        // Every run continues the same prefill (the f32 weights'), so only the steps differ.
        const prompt = Int32Array.of(5, 9, 13, 2, 40, 41, 0, 0, 7, 8, 90, 3);
        const run = async (m: QwenModel, h: HalfWeights | null) => {
          const cache = model.newCache(2, 9, Int32Array.of(0, 2));
          try {
            await scopeAsync(async () => void noGrad(() => model.hiddenCached({ ids: prompt, batch: 2, seq: 6 }, cache)));
            const out: Float32Array[] = [];
            for (const ids of [Int32Array.of(3, 50), Int32Array.of(96, 0), Int32Array.of(12, 60)]) {
              out.push(await scopeAsync(async () => read(noGrad(() => lastLogits(m, m.hiddenCached({ ids, batch: 2, seq: 1, halfWeights: h?.weights }, cache), h?.head)))));
            }
            return out;
          } finally {
            cache.dispose();
          }
        };
        const got = await run(model, half);
        const want = await run(twin, null);
        const f32 = await run(model, null);
        got.forEach((g, i) => assertClose(g, want[i], { atol: 2e-5, rtol: 1e-4, label: `step ${i}: f16 copies against rounded f32 weights` }));
        const apart = Math.max(...f32.flatMap((f, i) => [...f].map((v, j) => Math.abs(v - got[i][j]))));
        assert.ok(apart > 1e-4, `the f16 steps are as close to the f32 ones (${apart}) as if they read the f32 weights`);
      });
    } finally {
      half.dispose();
      for (const m of [model, twin]) for (const p of m.parameters()) p.dispose();
    }
  });

  test('LocalEngine with f16 weights samples as the f32 engine does up to their rounding, and follows the weights when they change', slow, async () => {
    const rt = await gpu();
    const model = tiny(12);
    const requests: GenerationRequest[] = [
      { promptIds: [5, 9, 13, 2], params: { maxTokens: 8, temperature: 0, topP: 1, topK: 0 } },
      { promptIds: [7, 1], params: { maxTokens: 8, temperature: 1, topP: 0.95, topK: 20, seed: 3 } },
      { promptIds: [40, 41, 42], params: { maxTokens: 5, temperature: 0.7, topP: 1, topK: 0, seed: 4 } },
    ];
    try {
      await withPolicy(rt, { decode: { fused: 'always' } }, async () => {
        const halfEngine = new LocalEngine(model);
        const f32Engine = new LocalEngine(model);
        const compare = async (when: string) => {
          const got = await withPolicy(rt, { decode: { weights: 'f16' } }, () => halfEngine.generate(requests));
          const want = await withPolicy(rt, { decode: { weights: 'f32' } }, () => f32Engine.generate(requests));
          got.forEach((g, i) => {
            assert.deepEqual(g.tokenIds, want[i].tokenIds, `${when}: request ${i}`);
            assertClose(g.logprobs, want[i].logprobs, { atol: 1e-2, rtol: 2e-3, label: `${when}: request ${i} log-probs` });
          });
          assert.notDeepEqual(got.map((g) => g.logprobs), want.map((g) => g.logprobs), `${when}: the f16 engine sampled from the f32 weights`);
          return got;
        };
        const before = await compare('before');
        // An update changes the f32 masters in place: the next generation packs them again.
        for (const name of decodeWeightNames(model)) {
          const w = model.param(name);
          rt.upload(w.buffer, 0, randn(w.size, seed++, 0.3));
        }
        const after = await compare('after the weights changed');
        assert.notDeepEqual(after.map((g) => g.tokenIds), before.map((g) => g.tokenIds), 'the change moved nothing');
        await halfEngine.close();
      });
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });

  test('a training run reports the rollout-to-trainer probability gap: rounding-level from f32 weights, wider from f16 copies', slow, async () => {
    const rt = await gpu();
    const root = mkdtempSync(join(tmpdir(), 'wgt-half-train-'));
    try {
      const modelDir = join(root, 'model');
      await tinyHouseholdModel(modelDir);
      const gaps = async (weights: 'f32' | 'f16') => {
        const config = loadConfig(undefined, [
          `model.path=${modelDir}`, `output.dir=${root}`, `output.runName=${weights}`, 'output.progress=none', 'output.tensorboard=false',
          'rollout.tasksPerIteration=2', 'rollout.groupSize=2', 'rollout.maxTurns=2', 'rollout.maxResponseTokens=12',
          'optim.miniBatchSize=4', 'optim.microBatchTokens=4096', 'optim.lr=1e-2', 'optim.warmupIterations=0',
          'validation.atStart=false', 'validation.every=0', 'validation.tasks=1', 'checkpoint.every=0', 'iterations=2',
        ]);
        // The software GPU takes the fused layers, which read the copies, only when forced.
        const run = await withPolicy(rt, { decode: { fused: 'always', weights } }, () => train(config, { log: () => {} }));
        return readMetrics(join(run.runDir, 'metrics.jsonl')).map((r) => [r['rollout/probs_diff_mean'], r['rollout/probs_diff_max']] as [number, number]);
      };
      const f32 = await gaps('f32');
      const f16 = await gaps('f16');
      for (const [label, rows] of [['f32', f32], ['f16', f16]] as const) {
        assert.equal(rows.length, 2, `${label}: two iterations`);
        for (const [mean, max] of rows) assert.ok(Number.isFinite(mean) && Number.isFinite(max) && mean <= max, `${label}: the gap is logged (${mean}, ${max})`);
      }
      // f32 decoding differs from scoring only in summation order.
      for (const [mean, max] of f32) assert.ok(mean < 1e-5 && max < 1e-4, `f32 gap ${mean}, ${max}`);
      // The f16 copies round every weight, so the gap widens, yet stays a rounding's worth.
      for (const [mean, max] of f16) assert.ok(max < 5e-2, `f16 gap ${mean}, ${max}`);
      assert.ok(f16.some(([mean], i) => mean > 2 * f32[i][0]), `the f16 gap (${f16.map(([m]) => m)}) is not wider than the f32 one (${f32.map(([m]) => m)})`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('f16 decode weights of a LoRA policy', () => {
  test('the copies carry the LoRA branches merged: fused steps follow the adapted model, not the base', slow, async () => {
    const rt = await gpu();
    const model = tiny(14);
    attachLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], baseModel: null }, 3);
    for (const { b } of model.lora.values()) rt.upload(b.buffer, 0, randn(b.size, seed++, 0.5));
    try {
      await withPolicy(rt, { decode: { fused: 'always' } }, async () => {
        const prompt = Int32Array.of(5, 9, 13, 2, 40, 41, 0, 0, 7, 8, 90, 3);
        const run = async (h: HalfWeights | null, lora: boolean) => {
          const saved = new Map(model.lora);
          if (!lora) model.lora.clear();
          const cache = model.newCache(2, 9, Int32Array.of(0, 2));
          try {
            await scopeAsync(async () => void noGrad(() => model.hiddenCached({ ids: prompt, batch: 2, seq: 6 }, cache)));
            return await scopeAsync(async () => read(noGrad(() => lastLogits(model, model.hiddenCached({ ids: Int32Array.of(3, 50), batch: 2, seq: 1, halfWeights: h?.weights }, cache), h?.head))));
          } finally {
            cache.dispose();
            for (const [k, v] of saved) model.lora.set(k, v);
          }
        };
        const half = HalfWeights.of(model);
        try {
          const merged = await run(half, true);
          const adapted = await run(null, true);
          const base = await run(null, false);
          assertClose(merged, adapted, { atol: 2e-2, rtol: 2e-2, label: 'merged f16 copies against the LoRA forward' });
          const moved = Math.max(...[...adapted].map((v, j) => Math.abs(v - base[j])));
          assert.ok(moved > 0.1, `the adapters hardly move the logits (${moved}): the test would not tell merged from base`);
        } finally {
          half.dispose();
        }
      });
    } finally {
      for (const p of [...model.parameters(), ...[...model.lora.values()].flatMap((l) => [l.a, l.b])]) p.dispose();
    }
  });
});

describe('decode steps on tensor cores (devices with f16 subgroup matrices)', () => {
  test('wide decode steps on tensor cores equal the op-by-op steps over f16-rounded weights within f16 activations; the engine samples alike', slow, async (t) => {
    const rt = await gpu();
    const missing = tensorMatmulMissing(rt);
    if (missing) return t.skip(missing);
    // k of 64 and 128: long enough to cut into runs of 32.
    const model = tiny(13, { hidden_size: 64, intermediate_size: 128 });
    const twin = await roundedTwin(model);
    const half = HalfWeights.of(model);
    const B = 3;
    try {
      // Three rows of these small weights take the tensor-core path here as a rollout's 128 rows of large ones would.
      await withPolicy(rt, { decode: { tensorMinRows: B, fusedAnyRowsMaxBytes: 0 } }, async () => {
        const prompt = Int32Array.of(5, 9, 13, 2, 40, 41, 0, 0, 7, 8, 90, 3, 1, 2, 3, 4, 5, 6);
        const run = async (m: QwenModel, h: HalfWeights | null) => {
          const cache = model.newCache(B, 9, Int32Array.of(0, 2, 1));
          try {
            await scopeAsync(async () => void noGrad(() => model.hiddenCached({ ids: prompt, batch: B, seq: 6 }, cache)));
            const out: Float32Array[] = [];
            for (const ids of [Int32Array.of(3, 50, 4), Int32Array.of(96, 0, 5), Int32Array.of(12, 60, 6)]) {
              out.push(await scopeAsync(async () => read(noGrad(() => lastLogits(m, m.hiddenCached({ ids, batch: B, seq: 1, halfWeights: h?.weights }, cache), h?.head)))));
            }
            return out;
          } finally {
            cache.dispose();
          }
        };
        // Without copies the step runs op by op on the twin's (f16-valued) f32 weights.
        const want = await run(twin, null);
        const got = await run(model, half);
        got.forEach((g, i) => assertClose(g, want[i], { atol: 2e-2, rtol: 2e-2, label: `step ${i}: tensor cores against op by op` }));
        // Runs of 32: every product of these weights cuts k, as a 128-row step's down projection does.
        const cut = await withPolicy(rt, { decode: { splitMinK: 32 } }, () => run(model, half));
        cut.forEach((g, i) => assertClose(g, want[i], { atol: 2e-2, rtol: 2e-2, label: `step ${i}: tensor cores with k in runs against op by op` }));
        const engine = new LocalEngine(model);
        const requests: GenerationRequest[] = Array.from({ length: B }, (_, i) => ({ promptIds: [5 + i, 9, 13], params: { maxTokens: 6, temperature: 0, topP: 1, topK: 0 } }));
        const tensorTokens = await engine.generate(requests);
        const plain = await withPolicy(rt, { decode: { tensorMinRows: 1 << 20 } }, () => engine.generate(requests));
        tensorTokens.forEach((g, i) => assertClose(g.logprobs, plain[i].logprobs, { atol: 5e-2, label: `request ${i} greedy log-probs` }));
        await engine.close();
      });
    } finally {
      half.dispose();
      for (const m of [model, twin]) for (const p of m.parameters()) p.dispose();
    }
  });
});
