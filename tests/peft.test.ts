import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../src/hf_model/config.ts';
import { loraScale, loraTargets, peftTensorName, readPeftAdapter, writePeftAdapter, type LoraWeights } from '../src/lora/peft.ts';
import type { LoraConfig } from '../src/models/causal_lm.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import { writeSafetensors } from '../src/safetensors/writer.ts';
import { randn } from '../src/util/random.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'peft-test-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

let tmpCount = 0;
const tmpPath = () => path.join(tmpRoot, String(tmpCount++));

const cfg = parseConfig(JSON.parse(fs.readFileSync(path.join(FIXTURES, 'qwen3-tiny', 'config.json'), 'utf8')));
const lora: LoraConfig = { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'], baseModel: 'Qwen/Qwen3-0.6B' };

function adapterWeights(): Map<string, LoraWeights> {
  const w = new Map<string, LoraWeights>();
  loraTargets(cfg, lora.targetModules).forEach((t, i) => {
    w.set(t.module, { a: randn(lora.r * t.inFeatures, 2 * i + 1), b: randn(t.outFeatures * lora.r, 2 * i + 2) });
  });
  return w;
}

const bits = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length);

describe('PEFT LoRA adapters', () => {
  test('targets follow PEFT suffix matching with [out, in] from the model', () => {
    const targets = loraTargets(cfg, lora.targetModules);
    assert.equal(targets.length, 9);
    assert.deepEqual(targets[0], { module: 'model.layers.0.self_attn.q_proj', outFeatures: 192, inFeatures: 96 });
    assert.deepEqual(targets[2], { module: 'model.layers.0.mlp.down_proj', outFeatures: 96, inFeatures: 224 });
    assert.equal(peftTensorName('model.layers.0.self_attn.q_proj', 'A'), 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight');
    assert.equal(loraScale(lora), 2);
    assert.equal(loraScale({ ...lora, useRslora: true }), 4);
  });

  test('writes PEFT names, shapes and adapter_config.json, and reads them back bit-identically', async () => {
    const dir = tmpPath();
    const weights = adapterWeights();
    await writePeftAdapter(dir, cfg, lora, weights);
    assert.deepEqual(fs.readdirSync(dir).sort(), ['adapter_config.json', 'adapter_model.safetensors']);
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'adapter_config.json'), 'utf8'));
    assert.equal(json.peft_type, 'LORA');
    assert.equal(json.task_type, 'CAUSAL_LM');
    assert.equal(json.r, 4);
    assert.equal(json.lora_alpha, 8);
    assert.equal(json.lora_dropout, 0);
    assert.equal(json.bias, 'none');
    assert.equal(json.base_model_name_or_path, 'Qwen/Qwen3-0.6B');
    assert.deepEqual(json.target_modules, ['down_proj', 'q_proj', 'v_proj']);
    const f = SafetensorsFile.open(path.join(dir, 'adapter_model.safetensors'));
    assert.deepEqual(f.info('base_model.model.model.layers.2.self_attn.v_proj.lora_A.weight').shape, [4, 96]);
    assert.deepEqual(f.info('base_model.model.model.layers.2.self_attn.v_proj.lora_B.weight').shape, [64, 4]);
    assert.equal(f.names().length, 18);
    f.close();

    const back = readPeftAdapter(dir, cfg);
    assert.deepEqual(back.config, { ...lora, targetModules: ['down_proj', 'q_proj', 'v_proj'], useRslora: false });
    assert.equal(back.weights.size, weights.size);
    for (const [module, w] of weights) {
      const got = back.weights.get(module)!;
      assert.deepEqual(bits(got.a), bits(w.a), module);
      assert.deepEqual(bits(got.b), bits(w.b), module);
    }
    assert.equal(readPeftAdapter(dir).weights.size, 9);
  });

  test('write refuses missing, unknown or mis-sized module weights', async () => {
    const weights = adapterWeights();
    weights.delete('model.layers.1.mlp.down_proj');
    await assert.rejects(writePeftAdapter(tmpPath(), cfg, lora, weights), /no weights for "model\.layers\.1\.mlp\.down_proj"/);
    const extra = adapterWeights().set('model.layers.0.self_attn.k_proj', { a: new Float32Array(1), b: new Float32Array(1) });
    await assert.rejects(writePeftAdapter(tmpPath(), cfg, lora, extra), /"model\.layers\.0\.self_attn\.k_proj" is not a module selected/);
    const wrong = adapterWeights();
    wrong.get('model.layers.0.self_attn.q_proj')!.a = new Float32Array(5);
    await assert.rejects(writePeftAdapter(tmpPath(), cfg, lora, wrong), /"model\.layers\.0\.self_attn\.q_proj" lora_A has 5 values, expected \[4, 96\]/);
    await assert.rejects(writePeftAdapter(tmpPath(), cfg, { ...lora, targetModules: ['wq'] }, new Map()), /select no linear layer/);
  });

  test('read validates adapter_config.json and the tensors against the model', async () => {
    const dir = tmpPath();
    await writePeftAdapter(dir, cfg, lora, adapterWeights());
    const configPath = path.join(dir, 'adapter_config.json');
    const json = JSON.parse(fs.readFileSync(configPath, 'utf8'));
    for (const [edit, pattern] of [
      [{ peft_type: 'IA3' }, /peft_type is "IA3"/],
      [{ bias: 'all' }, /bias is "all"/],
      [{ use_dora: true }, /use_dora is true/],
      [{ rank_pattern: { q_proj: 8 } }, /rank_pattern is not empty/],
      [{ modules_to_save: ['lm_head'] }, /modules_to_save/],
      [{ target_modules: '.*proj' }, /target_modules must be a list/],
      [{ r: 8 }, /lora_A\.weight" has shape \[4, 96\], expected \[8, 96\]/],
      [{ target_modules: ['q_proj', 'v_proj', 'down_proj', 'k_proj'] }, /no LoRA weights for "model\.layers\.0\.self_attn\.k_proj"/],
      [{ target_modules: ['q_proj', 'v_proj'] }, /adapts "model\.layers\.0\.mlp\.down_proj", which target_modules does not select/],
    ] as [Record<string, unknown>, RegExp][]) {
      fs.writeFileSync(configPath, JSON.stringify({ ...json, ...edit }));
      assert.throws(() => readPeftAdapter(dir, cfg), pattern, JSON.stringify(edit));
    }
    fs.writeFileSync(configPath, JSON.stringify(json));
    const weightsPath = path.join(dir, 'adapter_model.safetensors');
    writeSafetensors(weightsPath, [['base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight', new Float32Array(4 * 96), [4, 96]]]);
    assert.throws(() => readPeftAdapter(dir), /"model\.layers\.0\.self_attn\.q_proj" has lora_A but no lora_B/);
    writeSafetensors(weightsPath, [['model.layers.0.self_attn.q_proj.weight', new Float32Array(4), [4]]]);
    assert.throws(() => readPeftAdapter(dir), /tensor "model\.layers\.0\.self_attn\.q_proj\.weight" is not a PEFT LoRA weight/);
  });
});
