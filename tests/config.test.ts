import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { expectedShapes } from '../src/hf_model/checkpoint.ts';
import { parseConfig, toHfConfig, type ModelConfig } from '../src/hf_model/config.ts';
import { ConfigError } from '../src/hf_model/errors.ts';
import { configFromPreset } from '../src/hf_model/presets.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

function fixtureConfig(name: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, name, 'config.json'), 'utf8'));
}

function refuses(raw: Record<string, unknown>, pattern: RegExp): void {
  assert.throws(() => parseConfig(raw), (e: Error) => e instanceof ConfigError && pattern.test(e.message), `expected ${pattern}`);
}

function paramCount(cfg: ModelConfig): number {
  let n = 0;
  for (const shape of expectedShapes(cfg).values()) n += shape.reduce((a, b) => a * b, 1);
  return n;
}

function withoutRaw(cfg: ModelConfig): Omit<ModelConfig, 'raw'> {
  const { raw: _raw, ...rest } = cfg;
  return rest;
}

describe('config.json parsing', () => {
  test('qwen2 fixture: q/k/v biases, head_dim from hidden / heads, tied', () => {
    const cfg = parseConfig(fixtureConfig('qwen2-tiny'));
    assert.deepEqual(withoutRaw(cfg), {
      family: 'qwen2', architecture: 'Qwen2ForCausalLM', vocabSize: 320, hidden: 64, intermediate: 176, layers: 2,
      heads: 4, kvHeads: 2, headDim: 16, ropeTheta: 10000, rotaryDim: 16, rmsEps: 1e-6, tieEmbeddings: true,
      attentionBias: true, outputBias: false, qkNorm: false, attnOutputGate: false,
      layerTypes: ['full_attention', 'full_attention'], linearAttention: null, mtpLayers: 0, maxPositions: 256,
      bosTokenId: null, eosTokenIds: [], padTokenId: null, torchDtype: 'float32', weightPrefix: 'model.',
    });
  });

  test('qwen3 fixture: explicit head_dim, q/k norm, no bias, untied, rope theta 1e6', () => {
    const cfg = parseConfig(fixtureConfig('qwen3-tiny'));
    assert.equal(cfg.family, 'qwen3');
    assert.equal(cfg.headDim, 32);
    assert.equal(cfg.heads * cfg.headDim, 192);
    assert.equal(cfg.qkNorm, true);
    assert.equal(cfg.attentionBias, false);
    assert.equal(cfg.outputBias, false);
    assert.equal(cfg.tieEmbeddings, false);
    assert.equal(cfg.ropeTheta, 1e6);
    assert.equal(cfg.layers, 3);
    const biased = parseConfig({ ...fixtureConfig('qwen3-tiny'), attention_bias: true });
    assert.equal(biased.attentionBias, true);
    assert.equal(biased.outputBias, true);
  });

  test('qwen3.5 fixture: hybrid layer types, linear attention, partial rotary, output gate', () => {
    const cfg = parseConfig(fixtureConfig('qwen35-tiny'));
    assert.equal(cfg.family, 'qwen3_5');
    assert.deepEqual(cfg.layerTypes, ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention']);
    assert.deepEqual(cfg.linearAttention, { numKeyHeads: 2, numValueHeads: 4, keyHeadDim: 16, valueHeadDim: 16, convKernel: 4 });
    assert.equal(cfg.headDim, 32);
    assert.equal(cfg.rotaryDim, 8);
    assert.equal(cfg.attnOutputGate, true);
    assert.equal(cfg.ropeTheta, 1e7);
    assert.equal(cfg.tieEmbeddings, true);
    assert.equal(cfg.qkNorm, true);
  });

  test('qwen3.5 without layer_types derives them from full_attention_interval', () => {
    const raw = fixtureConfig('qwen35-tiny');
    delete raw.layer_types;
    const cfg = parseConfig({ ...raw, num_hidden_layers: 8, full_attention_interval: 4 });
    assert.deepEqual(cfg.layerTypes.map((t) => t[0]), ['l', 'l', 'l', 'f', 'l', 'l', 'l', 'f']);
  });

  test('multimodal qwen3_5 reads text_config and puts the decoder under model.language_model.', () => {
    const text: Record<string, unknown> = { ...fixtureConfig('qwen35-tiny'), model_type: 'qwen3_5_text' };
    delete text.architectures;
    text.rope_parameters = { rope_type: 'default', rope_theta: 1e7, partial_rotary_factor: 0.25, mrope_section: [1, 1, 2], mrope_interleaved: true };
    const cfg = parseConfig({ architectures: ['Qwen3_5ForConditionalGeneration'], model_type: 'qwen3_5', text_config: text, vision_config: {} });
    assert.equal(cfg.weightPrefix, 'model.language_model.');
    assert.equal(cfg.hidden, 64);
    assert.ok(expectedShapes(cfg).has('model.language_model.layers.3.self_attn.q_norm.weight'));
    refuses({ model_type: 'qwen3_5', text_config: { ...text, rope_scaling: { type: 'yarn' } } }, /text_config\.rope_scaling/);
    refuses({ model_type: 'qwen3_5' }, /text_config is missing/);
  });

  test('toHfConfig writes the fixture configs back key for key', () => {
    for (const name of ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny']) {
      const raw = fixtureConfig(name);
      assert.deepEqual(toHfConfig(parseConfig(raw)), raw, name);
    }
  });

  test('toHfConfig reflects edits to the normalised config and parses back to it', () => {
    const cfg = parseConfig(fixtureConfig('qwen3-tiny'));
    const edited: ModelConfig = { ...cfg, layers: 2, layerTypes: ['full_attention', 'full_attention'], eosTokenIds: [5, 7], vocabSize: 500 };
    const hf = toHfConfig(edited, { dtype: 'bfloat16' });
    assert.equal(hf.num_hidden_layers, 2);
    assert.deepEqual(hf.eos_token_id, [5, 7]);
    assert.equal(hf.dtype, 'bfloat16');
    assert.deepEqual(withoutRaw(parseConfig(hf)), { ...withoutRaw(edited), torchDtype: 'bfloat16' });
    assert.throws(() => toHfConfig({ ...cfg, layers: 5 }), /layerTypes has 3 entries for 5 layers/);
  });
});

describe('config.json refusals name the field', () => {
  const q2 = () => fixtureConfig('qwen2-tiny');
  test('rope scaling', () => {
    refuses({ ...q2(), rope_scaling: { type: 'yarn', factor: 4 } }, /rope_scaling .*not supported/);
    refuses({ ...q2(), rope_parameters: { rope_type: 'yarn', rope_theta: 1e4, factor: 4 } }, /rope_parameters\.rope_type "yarn"/);
    assert.equal(parseConfig({ ...q2(), rope_scaling: null }).ropeTheta, 10000);
  });

  test('sliding window', () => {
    refuses({ ...q2(), use_sliding_window: true, sliding_window: 4096 }, /use_sliding_window is true \(sliding_window 4096\)/);
    refuses({ ...fixtureConfig('qwen3-tiny'), layer_types: ['full_attention', 'sliding_attention', 'full_attention'] }, /layer_types\[1\] "sliding_attention"/);
    assert.equal(parseConfig({ ...q2(), use_sliding_window: false, sliding_window: 32768 }).family, 'qwen2');
  });

  test('mixture of experts', () => {
    refuses({ ...q2(), num_experts: 64 }, /num_experts is 64; mixture-of-experts/);
    refuses({ ...fixtureConfig('qwen3-tiny'), moe_intermediate_size: 768 }, /moe_intermediate_size/);
    assert.equal(parseConfig({ ...q2(), num_experts: 0 }).family, 'qwen2');
  });

  test('unknown model_type or architectures', () => {
    refuses({ ...q2(), model_type: 'llama' }, /model_type "llama" is not supported/);
    refuses({ ...q2(), model_type: 'qwen2_moe' }, /model_type "qwen2_moe"/);
    refuses({ ...q2(), architectures: ['Qwen3ForCausalLM'] }, /architectures "Qwen3ForCausalLM" is not supported for model_type qwen2/);
  });

  test('missing or malformed fields, activations, head counts', () => {
    const raw = q2();
    delete raw.hidden_size;
    refuses(raw, /config\.json: hidden_size:/);
    refuses({ ...q2(), vocab_size: -3 }, /vocab_size/);
    refuses({ ...q2(), hidden_act: 'gelu' }, /hidden_act "gelu"/);
    refuses({ ...q2(), num_key_value_heads: 3 }, /num_key_value_heads \(3\) must divide num_attention_heads \(4\)/);
    refuses({ ...q2(), layer_types: ['full_attention'] }, /layer_types has 1 entries for 2 layers/);
    const q35 = fixtureConfig('qwen35-tiny');
    delete q35.linear_key_head_dim;
    refuses(q35, /linear_key_head_dim is missing/);
  });
});

describe('presets', () => {
  test('Qwen2.5-0.5B and Qwen3-0.6B have their published parameter counts', () => {
    const q25 = configFromPreset('qwen2.5-0.5b');
    assert.equal(q25.hidden, 896);
    assert.equal(q25.headDim, 64);
    assert.equal(q25.tieEmbeddings, true);
    assert.equal(paramCount(q25), 494_032_768);
    assert.equal(paramCount(configFromPreset('qwen3-0.6b')), 596_049_920);
  });

  test('overrides are HF keys and go through the same validation', () => {
    const small = configFromPreset('qwen2.5-0.5b', { num_hidden_layers: 2, vocab_size: 1000 });
    assert.equal(small.layers, 2);
    assert.equal(small.vocabSize, 1000);
    assert.deepEqual(withoutRaw(parseConfig(toHfConfig(small))), withoutRaw(small));
    assert.throws(() => configFromPreset('qwen2.5-0.5b', { rope_scaling: { factor: 2 } }), /preset qwen2\.5-0\.5b: rope_scaling/);
    assert.throws(() => configFromPreset('llama-7b'), /unknown preset "llama-7b"/);
  });
});
