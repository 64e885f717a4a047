// Training against a remote rollout server (our `serve`, the vLLM-compatible API):
// with LoRA every update arrives as a new adapter name and the old one is unloaded;
// with full fine-tuning the server reloads each saved version through vLLM's
// /collective_rpc request.

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadCausalLM } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { HttpEngine } from '../src/engines/http_engine.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { startServer } from '../src/serve/server.ts';
import { loadConfig } from '../src/config/config.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { train } from '../src/trainer/train.ts';
import { gpu } from './support/gpu.ts';
import { tinyHouseholdModel } from './support/tiny_household.ts';

describe('weight sync to a rollout server', () => {
  test('LoRA adapters per update, and a full-weight reload', { timeout: 600_000 }, async () => {
    await gpu();
    const root = mkdtempSync(join(tmpdir(), 'wgt-sync-'));
    const modelDir = join(root, 'model');
    await tinyHouseholdModel(modelDir);
    const served = new LocalEngine(loadCausalLM(modelDir, { trainable: false }) as never, { tokenizer: await loadTokenizer(modelDir), name: 'base' });
    const server = await startServer(served, { allowedRoot: root });
    try {
      const common = [
        `model.path=${modelDir}`, `output.dir=${root}`, 'output.progress=none', 'output.tensorboard=false', 'output.trajectories=false',
        'rollout.engine=http', `rollout.url=${server.url}`, 'rollout.model=base', 'rollout.tasksPerIteration=1', 'rollout.groupSize=2',
        'rollout.maxTurns=1', 'rollout.maxResponseTokens=8', 'rollout.maxPromptTokens=512', 'validation.atStart=false', 'validation.tasks=1', 'checkpoint.every=0',
        'iterations=2', 'optim.lr=1e-2',
      ];
      const quiet = { log: () => {} };
      await train(loadConfig(undefined, [...common, 'model.lora={"r":2,"alpha":4}', 'output.runName=lora']), quiet);
      const names = (await new HttpEngine({ baseUrl: server.url, model: 'base' }).models());
      assert.equal(names.length, 2, names.join());
      assert.equal(names[0], 'base');
      assert.match(names[1], /^policy-[0-9a-f]{8}-step-2$/, 'the last adapter is served, earlier ones were unloaded');

      const full = await train(loadConfig(undefined, [...common, 'output.runName=full']), quiet);
      const rows = readMetrics(join(full.runDir, 'metrics.jsonl'));
      assert.ok(rows.every((r) => r.iteration === 0 || typeof r['time/weight_sync'] === 'number'));
      const last = join(root, 'full', 'sync', 'policy-step-2');
      assert.deepEqual(readdirSync(join(root, 'full', 'sync')), ['policy-step-2'], 'each version has its own directory, earlier ones are removed');
      assert.equal(served.models.list()[0].path, realpathSync(last), 'the server reloaded through collective_rpc from the last version');
      const reloaded = served.models.base.param('model.embed_tokens.weight');
      const trained = loadCausalLM(last, { trainable: false }).param('model.embed_tokens.weight');
      assert.deepEqual(await reloaded.toArray(), await trained.toArray(), 'the server runs the trained weights');
    } finally {
      await server.close();
    }
  });
});
