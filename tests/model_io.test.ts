// Export, LoRA and scoring of a loaded model: an exported checkpoint reloads
// bit-identically; a LoRA adapter saved, reloaded, merged and exported gives the same
// logits as the unmerged model; `score` gives the fixture's token log-probs.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { openCheckpoint } from '../src/hf_model/checkpoint.ts';
import { loadModel, saveModel } from '../src/models/load.ts';
import { attachLora, loadLora, loraParameters, mergeLora, saveLora } from '../src/lora/lora.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { scoreSequences } from '../src/scoring/score.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import { randn } from '../src/util/random.ts';
import { noGrad } from '../src/tensor/autograd.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}/`, import.meta.url).pathname;
const scratch = () => mkdtempSync(join(tmpdir(), 'wgt-model-'));

async function logitsOf(model: QwenModel, ids: Int32Array): Promise<Float32Array> {
  return scopeAsync(async () => read(noGrad(() => model.logits({ ids, batch: 2, seq: 12 }))));
}

describe('model export, LoRA and scoring', () => {
  test('an exported checkpoint reloads bit-identically', async () => {
    await gpu();
    const model = loadModel(fixture('qwen3-tiny'));
    const dir = join(scratch(), 'export');
    await saveModel(model, dir);
    const orig = openCheckpoint(fixture('qwen3-tiny'));
    const back = openCheckpoint(dir);
    assert.deepEqual(back.names(), orig.names());
    for (const name of orig.names()) assert.deepEqual(back.read(name), orig.read(name), name);
    assert.equal(back.config.family, 'qwen3');
    orig.close();
    back.close();
    for (const p of model.parameters()) p.dispose();
  });

  test('LoRA saved, reloaded, merged and exported gives the unmerged logits', async () => {
    await gpu();
    const ids = SafetensorsFile.open(`${fixture('qwen3-tiny')}expected.safetensors`).readInt32('input_ids');
    const model = loadModel(fixture('qwen3-tiny'));
    const base = await logitsOf(model, ids);
    attachLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], baseModel: null }, 1);
    assert.ok(model.parameters().every((p) => !p.requiresGrad), 'base weights freeze');
    assertClose(await logitsOf(model, ids), base, { atol: 0, rtol: 0, label: 'B = 0 leaves the model unchanged' });
    // Give B values so the adapter matters.
    loraParameters(model).forEach((t, i) => {
      if (t.name?.endsWith('lora_B.weight')) t.storage.rt.upload(t.buffer, 0, randn(t.size, 100 + i, 0.05));
    });
    const adapted = await logitsOf(model, ids);
    assert.ok(adapted.some((v, i) => Math.abs(v - base[i]) > 1e-3), 'the adapter changes the logits');

    const adapterDir = join(scratch(), 'adapter');
    await saveLora(model, adapterDir);
    const cfg = JSON.parse(readFileSync(join(adapterDir, 'adapter_config.json'), 'utf8'));
    assert.equal(cfg.peft_type, 'LORA');
    assert.equal(cfg.r, 4);

    const reloaded = loadModel(fixture('qwen3-tiny'));
    loadLora(reloaded, adapterDir);
    assertClose(await logitsOf(reloaded, ids), adapted, { atol: 0, rtol: 0, label: 'reloaded adapter' });

    mergeLora(reloaded);
    assert.equal(reloaded.lora.size, 0);
    assertClose(await logitsOf(reloaded, ids), adapted, { atol: 1e-5, rtol: 1e-5, label: 'merged' });

    const mergedDir = join(scratch(), 'merged');
    await saveModel(reloaded, mergedDir);
    assertClose(await logitsOf(loadModel(mergedDir), ids), adapted, { atol: 1e-5, rtol: 1e-5, label: 'merged and exported' });
  });

  test('scoreSequences and the score command give the fixture log-probs', async () => {
    await gpu();
    const expected = SafetensorsFile.open(`${fixture('qwen2-tiny')}expected.safetensors`);
    const ids = expected.readInt32('input_ids');
    const want = expected.readFloat32('token_logprobs');
    const model = loadModel(fixture('qwen2-tiny'), { trainable: false });
    // Different lengths in one batch: the second sequence is cut short and left-padded.
    const seqs = [Array.from(ids.subarray(0, 12)), Array.from(ids.subarray(12, 21))];
    const got = await scoreSequences(model, seqs);
    assertClose(got[0], want.subarray(0, 11), { atol: 1e-4, rtol: 0, label: 'full row' });
    assertClose(got[1], want.subarray(11, 19), { atol: 1e-4, rtol: 0, label: 'shorter, left-padded row' });

    const dir = scratch();
    const input = join(dir, 'in.jsonl');
    writeFileSync(input, seqs.map((s) => JSON.stringify({ token_ids: s })).join('\n') + '\n');
    const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;
    const run = spawnSync(process.execPath, [cli, 'score', '--model', fixture('qwen2-tiny'), '--input', input], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines[0].token_logprobs[0], null);
    assertClose(lines[0].token_logprobs.slice(1), want.subarray(0, 11), { atol: 1e-4, rtol: 0, label: 'score command' });

    writeFileSync(input, '{"token_ids": [1, 99999]}\n');
    const bad = spawnSync(process.execPath, [cli, 'score', '--model', fixture('qwen2-tiny'), '--input', input], { encoding: 'utf8' });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /in\.jsonl:1: token_ids\[1\] = 99999 is not a token id in \[0, 320\)/);
  });
});
