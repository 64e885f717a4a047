// What a run's checkpoints hold (checkpoint.dtype, checkpoint.keepLast): the model files in
// the source model's float type by default (the bundled models are bf16) with config.json
// saying so, the optimizer state in f32, f32 on request; the newest keepLast kept.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../src/config/config.ts';
import { openCheckpoint, storedDtype } from '../src/hf_model/checkpoint.ts';
import { SafetensorsReader } from '../src/safetensors/reader.ts';
import { train } from '../src/trainer/train.ts';
import { gpu } from './support/gpu.ts';

const slow = { timeout: 600_000 };

function modelFiles(ckpt: string) {
  const model = openCheckpoint(path.join(ckpt, 'model'));
  const dtype = storedDtype(model);
  model.close();
  const config = JSON.parse(fs.readFileSync(path.join(ckpt, 'model', 'config.json'), 'utf8'));
  const optimizer = SafetensorsReader.open(path.join(ckpt, 'optimizer.safetensors'));
  const optimizerDtypes = new Set(optimizer.names().map((n) => optimizer.info(n).dtype));
  optimizer.close();
  return { dtype, torchDtype: config.torch_dtype ?? config.dtype, optimizerDtypes: [...optimizerDtypes] };
}

describe('checkpoint.dtype and checkpoint.keepLast', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-ckpt-dtype-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  const run = (name: string, extra: string[]) => train(loadConfig('examples/smoke.yaml', [
    `output.dir=${root}`, `output.runName=${name}`, 'output.progress=none', 'validation.every=0', 'rollout.maxTurns=1', 'rollout.tasksPerIteration=1', ...extra,
  ]), { log: () => {} });

  test('by default the model files keep the source model\'s bf16, the optimizer state f32; the newest keepLast stay', slow, async () => {
    await gpu();
    const { runDir } = await run('default', ['iterations=3', 'checkpoint.keepLast=2']);
    const names = fs.readdirSync(path.join(runDir, 'checkpoints')).filter((n) => n.startsWith('ckpt-')).sort();
    assert.deepEqual(names, ['ckpt-2', 'ckpt-3']);
    assert.deepEqual(modelFiles(path.join(runDir, 'checkpoints', 'ckpt-3')), { dtype: 'BF16', torchDtype: 'bfloat16', optimizerDtypes: ['F32'] });
  });

  test('checkpoint.dtype=f32 saves the weights as trained', slow, async () => {
    await gpu();
    const { runDir } = await run('f32', ['iterations=1', 'checkpoint.dtype=f32']);
    assert.deepEqual(modelFiles(path.join(runDir, 'checkpoints', 'ckpt-1')), { dtype: 'F32', torchDtype: 'float32', optimizerDtypes: ['F32'] });
    assert.throws(() => loadConfig('examples/smoke.yaml', ['checkpoint.dtype=fp8']), /checkpoint\.dtype: expected one of "bf16", "f16", "f32", got "fp8" \(from override checkpoint\.dtype=fp8\)/);
  });
});
