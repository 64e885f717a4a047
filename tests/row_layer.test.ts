// The whole-layer decode kernel (shaders/row_layer.wgsl) against the op-by-op Qwen2
// layers, its reference: prefill and decode steps of left-padded rows, a context past
// one tile of keys, several rows a workgroup, and where it does not apply.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { lastLogits } from '../src/models/generate.ts';
import { LayerPacks } from '../src/models/layer_packs.ts';
import { loadCausalLM } from '../src/models/load.ts';
import { attachLora } from '../src/models/lora.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { rowLayerRows, takesRowLayers } from '../src/models/qwen_decode.ts';
import { noGrad } from '../src/tensor/autograd.ts';
import { rowLayer } from '../src/tensor/ops/decode.ts';
import { rowLayerForward } from '../src/reference/row_layer.ts';
import type { GenerationRequest } from '../src/rollout/engine.ts';
import { LocalEngine } from '../src/rollout/local_engine.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { randn } from '../src/util/random.ts';
import { assertClose, gpu, read, withPolicy } from './support/gpu.ts';
import { tinyQwen } from './support/tiny_qwen.ts';

const slow = { timeout: 300_000 };

/** Logits of the prefill of `prompts` (left-padded) and of `steps` decode steps, with or without the layer packs; the dispatches of the last step. */
async function decode(model: QwenModel, prompts: number[][], steps: number[][], packed: boolean): Promise<{ logits: Float32Array[]; dispatches: number }> {
  const rt = await gpu();
  const B = prompts.length;
  const P = Math.max(...prompts.map((p) => p.length));
  const padLeft = Int32Array.from(prompts, (p) => P - p.length);
  const input = new Int32Array(B * P);
  prompts.forEach((p, b) => input.set(p, b * P + padLeft[b]));
  const cache = model.newCache(B, P + steps.length, padLeft);
  const packs = packed ? LayerPacks.of(model) : null;
  try {
    const logits: Float32Array[] = [];
    let dispatches = 0;
    const step = (ids: Int32Array, seq: number) => scopeAsync(async () => {
      const start = rt.dispatchCount;
      const out = noGrad(() => lastLogits(model, model.hiddenCached({ ids, batch: B, seq, layerPacks: packs?.layers }, cache)));
      dispatches = rt.dispatchCount - start;
      logits.push(await read(out));
    });
    await step(input, P);
    for (const row of steps) await step(Int32Array.from(row), 1);
    return { logits, dispatches };
  } finally {
    packs?.dispose();
    cache.dispose();
  }
}

async function compare(model: QwenModel, prompts: number[][], steps: number[][], label: string): Promise<void> {
  const rt = await gpu();
  const plain = await decode(model, prompts, steps, false);
  const rows = await withPolicy(rt, { decode: { rowLayers: 'on' } }, () => decode(model, prompts, steps, true));
  plain.logits.forEach((want, i) => assertClose(rows.logits[i], want, { atol: 1e-4, rtol: 1e-4, label: `${label}, ${i ? `decode step ${i}` : 'prefill'}` }));
  assert.ok(rows.dispatches < plain.dispatches, `${label}: ${rows.dispatches} dispatches a step with a dispatch a layer, ${plain.dispatches} op by op`);
}

const dispose = (model: QwenModel) => {
  for (const p of model.parameters()) p.dispose();
};

describe('whole-layer decode steps', () => {
  test('Qwen2 with q/k/v biases: 4 steps of 3 left-padded rows equal the op-by-op layers', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 48, intermediate_size: 52, num_attention_heads: 3, num_key_value_heads: 1 }, 3);
    await compare(model, [[5, 9, 13, 2, 40, 41], [7, 8, 90, 3], [1, 2]], [[3, 50, 17], [96, 0, 4], [12, 12, 60], [33, 71, 8]], 'qwen2');
    dispose(model);
  });

  test('a context past one tile of keys (the online softmax across tiles), two q heads a kv head', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 64, intermediate_size: 40, num_attention_heads: 4, num_key_value_heads: 2 }, 8);
    const long = Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % 97);
    await compare(model, [long, long.slice(0, 7)], [[4, 5], [6, 7]], 'long context');
    dispose(model);
  });

  test('one layer against its CPU reference; several rows a workgroup, the last group partial, give the one-row results', slow, async () => {
    const rt = await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 32, intermediate_size: 40, num_attention_heads: 2, num_key_value_heads: 1 }, 9);
    const cfg = model.config;
    const packs = LayerPacks.of(model);
    try {
      const B = 5;
      const cap = 9;
      const offset = 6;
      const x = tensor(randn(B * cfg.hidden, 77), [B, 1, cfg.hidden]);
      const cacheShape = [B, cfg.kvHeads, cap, cfg.headDim];
      const keyData = randn(B * cfg.kvHeads * cap * cfg.headDim, 78);
      const valueData = randn(B * cfg.kvHeads * cap * cfg.headDim, 79);
      const positions = tensor(Int32Array.from([6, 5, 4, 6, 2]), [B, 1], 'i32');
      const pad = tensor(Int32Array.from([0, 1, 2, 0, 4]), [B], 'i32');
      const run = async (rowsPerGroup: number) => {
        const k = tensor(keyData, cacheShape);
        const v = tensor(valueData, cacheShape);
        const dims = { hidden: cfg.hidden, heads: cfg.heads, kvHeads: cfg.kvHeads, headDim: cfg.headDim, intermediate: cfg.intermediate, eps: cfg.rmsEps, theta: cfg.ropeTheta, rowsPerGroup };
        const y = noGrad(() => rowLayer(x, { packed: packs.layers[1].packed, at: packs.layers[1].at, dims }, k, v, positions, pad, offset));
        const out = { y: await read(y), k: await read(k), v: await read(v) };
        for (const t of [y, k, v]) t.dispose();
        return out;
      };
      const one = await run(1);
      // The CPU reference of the layer, on the same caches.
      const weights = new Map<string, Float32Array>();
      for (const [name, t] of model.params) if (name.includes('.layers.1.')) weights.set(name.replace(/^.*\.layers\.1\./, ''), await read(t));
      const refKeys = Float32Array.from(keyData);
      const refValues = Float32Array.from(valueData);
      const want = rowLayerForward({
        b: B, hidden: cfg.hidden, heads: cfg.heads, kvHeads: cfg.kvHeads, headDim: cfg.headDim, intermediate: cfg.intermediate, capacity: cap, offset,
        eps: cfg.rmsEps, theta: cfg.ropeTheta, weights, x: await read(x), keys: refKeys, values: refValues, positions: [6, 5, 4, 6, 2], pad: [0, 1, 2, 0, 4],
      });
      assertClose(one.y, want, { atol: 1e-4, rtol: 1e-4, label: 'against the CPU reference' });
      assertClose(one.k, refKeys, { atol: 1e-5, label: 'keys against the CPU reference' });
      assertClose(one.v, refValues, { atol: 1e-5, label: 'values against the CPU reference' });
      for (const rows of [2, 3, 4]) {
        const many = await run(rows);
        assertClose(many.y, one.y, { atol: 1e-5, label: `${rows} rows a workgroup` });
        assert.deepEqual(many.k, one.k, `${rows} rows: keys`);
        assert.deepEqual(many.v, one.v, `${rows} rows: values`);
      }
      for (const t of [x, positions, pad]) t.dispose();
      const cache = model.newCache(1, 1);
      await withPolicy(rt, { decode: { rowLayers: 'on' } }, () => noGrad(() => {
        assert.equal(rowLayerRows(model, 100, 1, cache), 1);
        assert.equal(rowLayerRows(model, 300, 1, cache), 2);
        assert.equal(rowLayerRows(model, 4000, 1, cache), 4);
        assert.equal(rowLayerRows(model, 100, 2, cache), 0, 'a prefill keeps the other layers');
        assert.equal(rowLayerRows(model, 100, 1, null), 0, 'no cache');
      }));
      assert.equal(rowLayerRows(model, 100, 1, cache), 0, 'off by default');
      await withPolicy(rt, { decode: { rowLayers: 'on' } }, () => assert.equal(rowLayerRows(model, 100, 1, cache), 0, 'a step that records gradients'));
      cache.dispose();
    } finally {
      packs.dispose();
      dispose(model);
    }
  });

  test('the local engine samples the same tokens with it (qwen2-tiny, sampled rows of several lengths, a row finishing early)', slow, async () => {
    const rt = await gpu();
    const model = loadCausalLM(new URL('./fixtures/qwen2-tiny/', import.meta.url).pathname, { trainable: false }) as QwenModel;
    try {
      const requests: GenerationRequest[] = [
        { promptIds: [5, 17, 230, 9, 44, 12], params: { maxTokens: 9, temperature: 1, topP: 1, topK: 0, seed: 1 } },
        { promptIds: [3, 4], params: { maxTokens: 9, temperature: 0.8, topP: 0.9, topK: 0, seed: 2 } },
        { promptIds: [7, 3, 250, 18], params: { maxTokens: 3, temperature: 0, topP: 1, topK: 0, seed: 3 } },
      ];
      const run = async () => {
        const start = rt.dispatchCount;
        const out = await new LocalEngine(model).generate(requests);
        return { out, dispatches: rt.dispatchCount - start };
      };
      const plain = await withPolicy(rt, { decode: { weights: 'f32' } }, run);
      const rows = await withPolicy(rt, { decode: { weights: 'f32', rowLayers: 'on' } }, run);
      rows.out.forEach((g, i) => {
        assert.deepEqual(g.tokenIds, plain.out[i].tokenIds, `request ${i}`);
        assertClose(g.logprobs, plain.out[i].logprobs, { atol: 1e-4, label: `request ${i} log-probs` });
      });
      assert.ok(rows.dispatches < plain.dispatches, `${rows.dispatches} dispatches with a dispatch a layer, ${plain.dispatches} without`);
    } finally {
      dispose(model);
    }
  });

  test('where it applies: asked for, Qwen2 layers without q/k-norm or LoRA, small enough', async () => {
    const rt = await gpu();
    const qwen2 = tinyQwen('qwen2.5-0.5b', { hidden_size: 32, intermediate_size: 40, num_attention_heads: 2, num_key_value_heads: 1 }, 10);
    const qwen3 = tinyQwen('qwen3-0.6b', { hidden_size: 32, intermediate_size: 36, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 12 }, 11);
    try {
      assert.equal(takesRowLayers(qwen2), false, 'off by default');
      await withPolicy(rt, { decode: { rowLayers: 'on' } }, () => {
        assert.equal(takesRowLayers(qwen2), true);
        assert.equal(takesRowLayers(qwen3), false, 'q/k-norm, o_proj bias');
        const big = { ...qwen2.config, hidden: 1024, intermediate: 4096, heads: 16, kvHeads: 2, headDim: 64 };
        assert.equal(takesRowLayers({ ...qwen2, config: big, lmHead: () => qwen2.lmHead(), lora: qwen2.lora } as unknown as QwenModel), false, '13M parameters a layer');
        attachLora(qwen2, { r: 2, alpha: 4, targetModules: ['v_proj'], baseModel: null }, 1);
        assert.equal(takesRowLayers(qwen2), false, 'LoRA');
      });
    } finally {
      for (const m of [qwen2, qwen3]) dispose(m);
      for (const b of qwen2.lora.values()) (b.a.dispose(), b.b.dispose());
    }
  });
});
