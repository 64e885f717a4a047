// The whole model against PyTorch golden outputs (tests/fixtures, made by
// make_fixtures.py with transformers): logits, token log-probs, loss, gradients,
// left-padded logits and greedy decoding.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadModel } from '../src/models/load.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { greedyGenerate } from '../src/scoring/generate.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import { backward, noGrad, zeroGrad } from '../src/tensor/autograd.ts';
import { mean, neg, reshape, slice, tokenLogprobs } from '../src/tensor/ops/index.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}/`, import.meta.url).pathname;

for (const name of ['qwen2-tiny', 'qwen3-tiny']) {
  describe(`${name} matches PyTorch`, () => {
    let model: QwenModel;
    let expected: SafetensorsFile;
    let ids: Int32Array;
    const B = 2;
    const T = 12;

    test('loads through the project loader', async () => {
      await gpu();
      model = loadModel(fixture(name));
      expected = SafetensorsFile.open(`${fixture(name)}expected.safetensors`);
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
        // Positions 0..T-2 of each sequence predict the next token.
        const used = slice(hidden, 1, 0, T - 1);
        const { logprobs } = tokenLogprobs(reshape(used, [B * (T - 1), H]), model.lmHead(), Int32Array.from(targets), { chunk: 100 });
        assertClose(await read(logprobs), expected.readFloat32('token_logprobs'), { atol: 1e-4, rtol: 0, label: 'token_logprobs' });
        const loss = neg(mean(logprobs));
        assertClose(await read(loss), expected.readFloat32('loss'), { atol: 1e-5, rtol: 1e-5, label: 'loss' });

        zeroGrad(model.parameters());
        backward(loss);
        for (const gname of expected.names().filter((n) => n.startsWith('grad.'))) {
          const pname = gname.slice(5);
          const p = model.param(pname);
          assert.ok(p.grad, `no gradient for ${pname}`);
          const want = expected.readFloat32(gname);
          const maxAbs = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
          assertClose(await read(p.grad), want, { atol: 1e-3 * maxAbs, rtol: 1e-3, label: gname });
        }
        zeroGrad(model.parameters());
      });
    });

    test('left-padded logits (valid positions)', async () => {
      const mask = expected.readInt32('padded.attention_mask');
      const padLeft = new Int32Array(B);
      for (let b = 0; b < B; b++) {
        let p = 0;
        while (p < T && mask[b * T + p] === 0) p++;
        padLeft[b] = p;
      }
      assert.deepEqual([...padLeft], [0, 3]);
      await scopeAsync(async () => {
        const got = await read(noGrad(() => model.logits({ ids, batch: B, seq: T, padLeft })));
        const want = expected.readFloat32('padded.logits');
        const V = model.config.vocabSize;
        const keep = (a: Float32Array) => a.filter((_, i) => {
          const pos = Math.floor(i / V);
          return mask[pos] === 1;
        });
        assertClose(keep(got), keep(want), { atol: 1e-4, rtol: 1e-4, label: 'padded logits' });
      });
    });

    test('greedy continuation is exactly the same', async () => {
      const prompt = expected.readInt32('greedy.prompt');
      const want = expected.readInt32('greedy.output');
      const out = await greedyGenerate(model, prompt, want.length - prompt.length);
      assert.deepEqual([...out], [...want]);
    });
  });
}
