// serve, score and export take what eval takes as "the model": a model directory, a
// training checkpoint (full or LoRA) or a run directory (its latest checkpoint), each
// through src/checkpoint/model_source.ts, from the CLI.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { saveCheckpoint } from '../src/checkpoint/checkpoint.ts';
import { openCheckpoint, storedDtype } from '../src/hf_model/checkpoint.ts';
import { loadModel } from '../src/models/load.ts';
import { attachLora } from '../src/lora/lora.ts';
import { gpu } from './support/gpu.ts';
import { startServe } from './support/cli_process.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CLI = path.join(ROOT, 'src', 'cli', 'main.ts');
const FIXTURE = path.join(ROOT, 'tests', 'fixtures', 'qwen2-tiny');
const slow = { timeout: 600_000 };

const cli = (args: string[]) => {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 300_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

describe('model sources through serve, score and export', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-model-source-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  const run = path.join(root, 'run');
  let full = '';
  let lora = '';
  const input = path.join(root, 'ids.jsonl');

  before(async () => {
    await gpu();
    const weights = loadModel(FIXTURE, { trainable: false });
    const state = (iteration: number) => ({ iteration, configHash: 'test', rng: {} });
    full = await saveCheckpoint(path.join(run, 'checkpoints'), { model: { kind: 'full', model: weights }, optimizerState: {}, trainerState: state(4) });
    attachLora(weights, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'], useRslora: false, baseModel: FIXTURE }, 1);
    lora = await saveCheckpoint(path.join(root, 'lora', 'checkpoints'), { model: { kind: 'lora', model: weights, basePath: FIXTURE }, optimizerState: {}, trainerState: state(2) });
    for (const p of [...weights.parameters(), ...[...weights.lora.values()].flatMap((l) => [l.a, l.b])]) p.dispose();
    fs.writeFileSync(input, `${JSON.stringify({ token_ids: [3, 7, 11, 5] })}\n`);
  });

  test('score: a run directory and a checkpoint score as the model they hold', slow, () => {
    const base = cli(['score', '--model', FIXTURE, '--input', input]);
    assert.equal(base.code, 0, base.err);
    for (const model of [run, full, lora]) {
      const r = cli(['score', '--model', model, '--input', input]);
      assert.equal(r.code, 0, `${model}: ${r.err}`);
      // Saved as f32 and a fresh adapter (B = 0): the same log-probs.
      assert.equal(r.out, base.out, model);
    }
    const bad = cli(['score', '--model', root, '--input', input]);
    assert.equal(bad.code, 1);
    assert.match(bad.err, /--model .*: not a Hugging Face model directory \(config\.json\), a training checkpoint \(checkpoint\.json\) or a run directory/);
  });

  test('serve: a run directory serves its latest checkpoint', slow, async () => {
    const { child, url: listening } = startServe([run, '--port', '0']);
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      const url = await listening;
      const models = await (await fetch(`${url}/v1/models`)).json() as { data: { id: string; root: string }[] };
      assert.equal(models.data[0].id, run);
      assert.equal(models.data[0].root, path.join(full, 'model'));
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });

  test('export: a run in bf16, a LoRA checkpoint as its adapter or merged', slow, () => {
    const out = path.join(root, 'exported');
    const r = cli(['export', run, '--out', out, '--dtype', 'bf16']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /exported .*run \(.*ckpt-4\) to .*exported: a Hugging Face model in bf16/);
    const config = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
    assert.equal(config.torch_dtype ?? config.dtype, 'bfloat16');
    const ckpt = openCheckpoint(out);
    assert.equal(storedDtype(ckpt), 'BF16');
    ckpt.close();

    const adapter = path.join(root, 'adapter');
    const a = cli(['export', lora, '--out', adapter]);
    assert.equal(a.code, 0, a.err);
    assert.deepEqual(fs.readdirSync(adapter).sort(), ['.wgt-export.json', 'adapter_config.json', 'adapter_model.safetensors']);
    const merged = path.join(root, 'merged');
    const m = cli(['export', lora, '--out', merged, '--merge']);
    assert.equal(m.code, 0, m.err);
    assert.match(m.out, /the merged model in f32/);
    const s = cli(['score', '--model', merged, '--input', input]);
    assert.equal(s.out, cli(['score', '--model', FIXTURE, '--input', input]).out, 'a fresh adapter merges to the base');
    const refused = cli(['export', lora, '--out', adapter, '--dtype', 'f16']);
    assert.equal(refused.code, 1);
    assert.match(refused.err, /is a LoRA adapter, kept as trained; pass --merge/);
  });
});
