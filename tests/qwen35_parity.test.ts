// Qwen3.5's hybrid model against the PyTorch golden outputs of qwen35-tiny (made by
// make_fixture_qwen35.py with transformers' reference implementation): logits, token
// log-probs, loss, gradients and greedy decoding; then what the fixture does not
// cover: left padding, cached prefill + decoding, and the multimodal checkpoint layout
// with MTP and vision tensors to skip.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { CausalLM } from '../src/models/causal_lm.ts';
import { openCheckpoint } from '../src/hf_model/checkpoint.ts';
import { loadCausalLM, loadModel, saveModel } from '../src/models/load.ts';
import { Qwen35Model } from '../src/models/qwen35.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import { writeSafetensors } from '../src/safetensors/writer.ts';
import { backward, noGrad, zeroGrad } from '../src/tensor/autograd.ts';
import { linear, mean, neg, reshape, slice, tokenLogprobs } from '../src/tensor/ops/index.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const dir = new URL('./fixtures/qwen35-tiny/', import.meta.url).pathname;
const B = 2;
const T = 12;

function argmax(a: Float32Array, from: number, n: number): number {
  let best = 0;
  for (let j = 1; j < n; j++) if (a[from + j] > a[from + best]) best = j;
  return best;
}

/** Greedy decoding through the cache: one prefill of the prompt, then a token per step. */
async function greedy(model: CausalLM, prompt: Int32Array, newTokens: number): Promise<number[]> {
  const V = model.config.vocabSize;
  const cache = model.newCache(1, prompt.length + newTokens);
  const out = [...prompt];
  try {
    let step = prompt;
    for (let i = 0; i < newTokens; i++) {
      const logits = await scopeAsync(async () => {
        const h = noGrad(() => model.hiddenCached({ ids: step, batch: 1, seq: step.length }, cache));
        const last = reshape(slice(h, 1, step.length - 1, step.length), [1, model.config.hidden]);
        return read(noGrad(() => linear(last, model.lmHead())));
      });
      step = Int32Array.of(argmax(logits, 0, V));
      out.push(step[0]);
    }
  } finally {
    cache.dispose();
  }
  return out;
}

describe('qwen35-tiny matches PyTorch', () => {
  let model: CausalLM;
  let expected: SafetensorsFile;
  let ids: Int32Array;

  test('loads through the project loader as the hybrid model', async () => {
    await gpu();
    model = loadCausalLM(dir);
    assert.ok(model instanceof Qwen35Model);
    assert.deepEqual(model.skipped, []);
    assert.throws(() => loadModel(dir), /loadCausalLM/);
    expected = SafetensorsFile.open(`${dir}expected.safetensors`);
    ids = expected.readInt32('input_ids');
    assert.equal(ids.length, B * T);
  });

  test('logits, token log-probs, loss and gradients', async () => {
    await scopeAsync(async () => {
      const logits = model.logits({ ids, batch: B, seq: T });
      assertClose(await read(logits), expected.readFloat32('logits'), { atol: 1e-4, rtol: 1e-4, label: 'logits' });

      const hidden = model.hidden({ ids, batch: B, seq: T });
      const H = model.config.hidden;
      const targets: number[] = [];
      for (let b = 0; b < B; b++) for (let t = 0; t < T - 1; t++) targets.push(ids[b * T + t + 1]);
      const used = reshape(slice(hidden, 1, 0, T - 1), [B * (T - 1), H]);
      const { logprobs } = tokenLogprobs(used, model.lmHead(), Int32Array.from(targets), { chunk: 100 });
      assertClose(await read(logprobs), expected.readFloat32('token_logprobs'), { atol: 1e-4, rtol: 0, label: 'token_logprobs' });
      const loss = neg(mean(logprobs));
      assertClose(await read(loss), expected.readFloat32('loss'), { atol: 1e-5, rtol: 1e-5, label: 'loss' });

      zeroGrad(model.parameters());
      backward(loss);
      const names = expected.names().filter((n) => n.startsWith('grad.'));
      assert.ok(names.some((n) => n.includes('linear_attn')) && names.some((n) => n.includes('self_attn')));
      for (const gname of names) {
        const p = model.param(gname.slice(5));
        assert.ok(p.grad, `no gradient for ${gname.slice(5)}`);
        const want = expected.readFloat32(gname);
        const maxAbs = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        assertClose(await read(p.grad), want, { atol: 1e-3 * maxAbs, rtol: 1e-3, label: gname });
      }
      zeroGrad(model.parameters());
    });
  });

  test('greedy continuation is exactly the same', async () => {
    const prompt = expected.readInt32('greedy.prompt');
    const want = expected.readInt32('greedy.output');
    assert.deepEqual(await greedy(model, prompt, want.length - prompt.length), [...want]);
  });

  test('left padding leaves the valid positions unchanged', async () => {
    const pad = 3;
    const padded = new Int32Array(B * (T + pad));
    for (let b = 0; b < B; b++) {
      // Row 0: three arbitrary padding ids before the fixture's row 0; row 1: an unpadded
      // sequence of T + 3 tokens, compared with running it alone.
      padded.set(b === 0 ? [7, 300, 12] : ids.subarray(b * T, b * T + pad), b * (T + pad));
      padded.set(ids.subarray(b * T, (b + 1) * T), b * (T + pad) + pad);
    }
    await scopeAsync(async () => {
      const got = await read(noGrad(() => model.logits({ ids: padded, batch: B, seq: T + pad, padLeft: Int32Array.from([pad, 0]) })));
      const V = model.config.vocabSize;
      const want = expected.readFloat32('logits');
      assertClose(got.subarray(pad * V, (T + pad) * V), want.subarray(0, T * V), { atol: 1e-4, rtol: 1e-4, label: 'padded row' });
      const plain = await read(noGrad(() => model.logits({ ids: padded.subarray(T + pad), batch: 1, seq: T + pad })));
      assertClose(got.subarray((T + pad) * V), plain, { atol: 1e-4, rtol: 1e-4, label: 'unpadded row' });
    });
  });

  test('a cached prefill and token-by-token decoding give the full pass logits', async () => {
    const padLeft = Int32Array.from([0, 4]);
    await scopeAsync(async () => {
      const V = model.config.vocabSize;
      const want = await read(noGrad(() => model.logits({ ids, batch: B, seq: T, padLeft })));
      const cache = model.newCache(B, T, padLeft);
      try {
        let at = 0;
        for (const n of [9, 1, 2]) {
          const step = new Int32Array(B * n);
          for (let b = 0; b < B; b++) step.set(ids.subarray(b * T + at, b * T + at + n), b * n);
          const got = await read(noGrad(() => linear(model.hiddenCached({ ids: step, batch: B, seq: n }, cache), model.lmHead())));
          for (let b = 0; b < B; b++) {
            const valid = Math.max(at, padLeft[b]);
            assertClose(
              got.subarray((b * n + valid - at) * V, (b + 1) * n * V), want.subarray((b * T + valid) * V, (b * T + at + n) * V),
              { atol: 1e-4, rtol: 1e-4, label: `row ${b}, tokens ${at}..${at + n}` },
            );
          }
          at += n;
        }
      } finally {
        cache.dispose();
      }
    });
  });

  test('an exported checkpoint reloads bit-identically', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'wgt-qwen35-')), 'export');
    await saveModel(model, out);
    const orig = openCheckpoint(dir);
    const back = openCheckpoint(out);
    assert.deepEqual(back.names(), orig.names());
    for (const name of orig.names()) assert.deepEqual(back.read(name), orig.read(name), name);
    assert.deepEqual(back.config.layerTypes, orig.config.layerTypes);
    orig.close();
    back.close();
  });

  test('the multimodal layout loads the text model and reports MTP and vision tensors as skipped', async () => {
    const config = JSON.parse(readFileSync(`${dir}config.json`, 'utf8'));
    const out = mkdtempSync(join(tmpdir(), 'wgt-qwen35-'));
    writeFileSync(join(out, 'config.json'), JSON.stringify({
      architectures: ['Qwen3_5ForConditionalGeneration'], model_type: 'qwen3_5', tie_word_embeddings: true,
      text_config: { ...config, architectures: undefined, model_type: 'qwen3_5_text', mtp_num_hidden_layers: 1 },
      vision_config: { depth: 1, hidden_size: 8 },
    }));
    const weights = SafetensorsFile.open(`${dir}model.safetensors`);
    const entries: [string, Float32Array, number[]][] = weights.names().map((n) => [n.replace(/^model\./, 'model.language_model.'), weights.readFloat32(n), [...weights.info(n).shape]]);
    entries.push(['model.visual.patch_embed.proj.weight', new Float32Array(8), [8]], ['mtp.fc.weight', new Float32Array(4), [2, 2]], ['mtp.norm.weight', new Float32Array(2), [2]]);
    writeSafetensors(join(out, 'model.safetensors'), entries);
    weights.close();
    const mm = loadCausalLM(out, { trainable: false });
    assert.ok(mm instanceof Qwen35Model);
    assert.deepEqual(mm.skipped, ['multi-token-prediction head (mtp.*): 2 tensors', 'vision tower (model.visual.*): 1 tensors']);
    await scopeAsync(async () => {
      const got = await read(noGrad(() => mm.logits({ ids, batch: B, seq: T })));
      assertClose(got, expected.readFloat32('logits'), { atol: 1e-4, rtol: 1e-4, label: 'multimodal layout logits' });
    });
    for (const p of mm.parameters()) p.dispose();
  });
});
