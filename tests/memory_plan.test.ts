// The memory plan (memory/memory_plan.ts), the run's budget and the bounds its shape
// sets (run/memory.ts), and the buffer pool's cap (gpu/buffer_pool.ts).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../src/config/config.ts';
import { applySoftwareGpuScale, EMBEDDED_RECIPE } from '../src/config/default_run.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { trainingMemoryPlan } from '../src/run/memory.ts';
import { configFromPreset } from '../src/hf_model/presets.ts';
import { decodeRowBytes, GIB, kvBytesPerRow, MemoryPlanError, parameterCount, planMemory, type PlanInput } from '../src/memory/memory_plan.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { gpu } from './support/gpu.ts';

const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;
const q05 = configFromPreset('qwen2.5-0.5b');

const input = (over: Partial<PlanInput>): PlanInput => ({
  model: q05, trains: 'all', referenceCopy: true, microBatchTokens: 8192, rolloutRows: 128, rowTokens: 2048 + 512,
  budgetBytes: 16 * GIB, checkpointing: 'auto', ...over,
});

describe('memory plan', () => {
  test('shapes: Qwen2.5-0.5B\'s parameters and KV cache per row', () => {
    assert.equal(parameterCount(q05), 494_032_768);
    // 24 layers x (K and V) x 2 kv heads x 64 dims x 4 bytes per token.
    assert.equal(kvBytesPerRow(q05, 1000), 24 * 2 * 2 * 64 * 4 * 1000);
  });

  test('0.5B full-weight GRPO in 16 GiB: the layers are checkpointed and the rollout batch narrowed to fit', () => {
    const plan = planMemory(input({}));
    // Weights, the reference copy, two AdamW moments: 4 x 494M x 4 bytes.
    assert.equal(plan.residentBytes, 4 * 4 * 494_032_768);
    assert.equal(plan.checkpointLayers, true);
    assert.match(plan.notes.join('\n'), /layers checkpointed in the update/);
    assert.ok(plan.updateBytes <= 16 * GIB && plan.rolloutBytes <= 16 * GIB, JSON.stringify(plan));
    assert.ok(plan.rolloutRows >= 1 && plan.rolloutRows <= 128);
    // Without the budget's pressure nothing changes.
    const roomy = planMemory(input({ budgetBytes: 200 * GIB }));
    assert.deepEqual([roomy.checkpointLayers, roomy.microBatchTokens, roomy.rolloutRows, roomy.notes], [false, 8192, 128, []]);
    // The embedded recipe's 32,768-token micro-batches are cut to fit 16 GiB.
    assert.ok(planMemory(input({ microBatchTokens: 32768 })).microBatchTokens < 32768);
  });

  test('the decode weights\' f16 copies are planned beside the rollout: fewer rows, and a refusal that names them', () => {
    const lora = input({ trains: 'lora', loraRank: 16, referenceCopy: false, budgetBytes: 6 * GIB });
    const without = planMemory(lora);
    const withCopies = planMemory({ ...lora, decodeCopies: true });
    // Two bytes of every weight while a rollout decodes.
    assert.ok(withCopies.rolloutRows < without.rolloutRows, `${withCopies.rolloutRows} rows with the copies, ${without.rolloutRows} without`);
    assert.ok(withCopies.rolloutBytes <= 6 * GIB, JSON.stringify(withCopies));
    assert.equal(planMemory({ ...lora, decodeCopies: true, rolloutRows: 0 }).rolloutBytes, planMemory({ ...lora, rolloutRows: 0 }).rolloutBytes, 'rollouts from a server pack nothing');
    assert.throws(() => planMemory({ ...lora, decodeCopies: true, budgetBytes: 4 * GIB, rowTokens: 65536 }), (e: unknown) =>
      e instanceof MemoryPlanError && /f16 copies 0\.92 GiB/.test(e.message) && /--decode-weights f32/.test(e.message));
  });

  test('rollout batches are sized in bytes: rows of the longest row always fit, shorter rows fill the same bytes', () => {
    // LoRA 0.5B in 8 GiB with f16 copies: rows of 2,048 + 512 tokens are narrowed, rows of a 400-token prompt and 256 new tokens are not.
    const plan = planMemory(input({ trains: 'lora', loraRank: 16, referenceCopy: false, budgetBytes: 8 * GIB, decodeCopies: true }));
    assert.ok(plan.rolloutRows < 128, `${plan.rolloutRows} rows`);
    assert.equal(plan.rolloutMaxRows, 128);
    assert.ok(plan.rolloutRows * decodeRowBytes(q05, 2048 + 512) <= plan.rolloutBatchBytes);
    assert.ok((plan.rolloutRows + 1) * decodeRowBytes(q05, 2048 + 512) > plan.rolloutBatchBytes);
    assert.ok(128 * decodeRowBytes(q05, 400 + 256) <= plan.rolloutBatchBytes, `${plan.rolloutBatchBytes} bytes`);
    assert.match(plan.notes.join('\n'), new RegExp(`rollout batches of ${plan.rolloutRows} rows of 2560 tokens fit the budget; shorter rows fill batches up to rollout.maxBatch 128`));
    // The peak counts the batch bytes, not only the narrowed rows.
    assert.ok(plan.rolloutBytes <= 8 * GIB && plan.rolloutBytes > plan.residentBytes + plan.rolloutRows * decodeRowBytes(q05, 2048 + 512), JSON.stringify(plan));
    // One row is the sampling logits and the cache of its own length, with the pool's slack on both.
    assert.equal(decodeRowBytes(q05, 1000), 1.25 * (kvBytesPerRow(q05, 1000) + 4 * q05.vocabSize));
  });

  test('a budget too small is refused, naming the settings to change', () => {
    assert.throws(() => planMemory(input({ budgetBytes: 4 * GIB })), (e: Error) =>
      e instanceof MemoryPlanError && /budget is 4\.00 GiB/.test(e.message) && /gpu\.memory \(--gpu-memory\)/.test(e.message) &&
      /activations of 2048 tokens/.test(e.message) && /model\.lora/.test(e.message));
    assert.throws(() => planMemory(input({ budgetBytes: 16 * GIB, checkpointing: 'off' })), /gpu\.checkpointing: auto or on/);
    // LoRA keeps one copy of the weights and small optimizer state: 6 GiB holds it.
    const lora = planMemory(input({ trains: 'lora', loraRank: 16, referenceCopy: false, budgetBytes: 6 * GIB }));
    assert.ok(lora.residentBytes < 2.5 * GIB);
    assert.ok(lora.microBatchTokens < 8192 && lora.microBatchTokens >= 2048, `${lora.microBatchTokens}`);
    assert.match(lora.notes.join('\n'), new RegExp(`update micro-batches of ${lora.microBatchTokens} tokens, not optim.microBatchTokens 8192`));
  });

  test('the update\'s estimate is of the micro-batch the plan chose, its logits chunk included, not of the one asked for', () => {
    // A small vocabulary, so a micro-batch's logits stay under the log-prob op's chunk budget.
    const small = configFromPreset('qwen2.5-0.5b', { vocab_size: 30000, hidden_size: 256, intermediate_size: 768, num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2 });
    const need = (tokens: number) => planMemory(input({ model: small, microBatchTokens: tokens, budgetBytes: 1e15, checkpointing: 'on' })).updateBytes;
    const plan = planMemory(input({ model: small, microBatchTokens: 16384, budgetBytes: need(4096), checkpointing: 'on' }));
    assert.equal(plan.microBatchTokens, 4096);
    assert.equal(plan.updateBytes, need(4096));
  });

  test('a run scaled down to a few short episodes is planned for what it can hold: its step\'s sequences, its episodes', () => {
    const full = loadConfig(undefined, [...EMBEDDED_RECIPE]);
    const scaled = trainingMemoryPlan(applySoftwareGpuScale(full, []).config);
    // 1 task x 2 runs x 2 turns: 4 sequences of at most the 2,008 prompt tokens the context leaves and 40 response tokens.
    assert.equal(scaled.updateTokens, 4 * 2048);
    assert.equal(scaled.checkpointLayers, false);
    assert.deepEqual(scaled.notes, []);
    assert.ok(scaled.updateBytes < 1.5 * GIB, `${scaled.updateBytes / GIB} GiB`);
    // Two episodes decode at once (one task x 2 runs; the validation's one task x 1 run).
    assert.equal(scaled.rolloutBusyRows, 2);
    assert.ok(scaled.rolloutBytes < 0.5 * GIB, `${scaled.rolloutBytes / GIB} GiB`);
    // At full size the micro-batches are the recipe's 32,768 tokens, whose plain tape needs the checkpoints,
    // and the validation's 512 episodes decode together as far as the default 4 GiB holds them.
    const recipe = trainingMemoryPlan(full);
    assert.deepEqual([recipe.updateTokens, recipe.checkpointLayers], [32768, true]);
    assert.equal(recipe.rolloutBusyRows, Math.min(recipe.rolloutRows, 512));
    assert.ok(recipe.rolloutBusyRows > 128, `${recipe.rolloutBusyRows} rows`);
  });

  test('`train` scaled down on the software GPU plans at least what it holds, and checkpoints nothing', { timeout: 600_000 }, () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-memory-plan-'));
    try {
      const r = spawnSync(process.execPath, [cli, 'train', 'iterations=1', `output.dir=${out}`, 'output.progress=none'], { encoding: 'utf8', env: { ...process.env, EGL_PLATFORM: 'surfaceless' } });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      if (!/^software GPU: scaled the run down/m.test(r.stdout)) return;
      const plan = /update peak at most about ([\d.]+) GiB \(micro-batches of up to (\d+) tokens\), rollout peak at most about ([\d.]+) GiB \((\d+) rows\)/.exec(r.stdout);
      assert.ok(plan, r.stdout);
      assert.doesNotMatch(r.stdout, /checkpointed/);
      const [row] = readMetrics(path.join(out, 'household-grpo-s0', 'metrics.jsonl'));
      const measured = (phase: string) => row[`memory/${phase}_peak_gib`] as number;
      assert.ok(Number(plan[1]) >= measured('update') && Number(plan[3]) >= measured('rollout'), `${plan[0]}; measured ${JSON.stringify(row)}`);
      assert.equal(Number(plan[4]), 2);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  test('`train` refuses a run that cannot fit before any GPU work, naming the settings', () => {
    const r = spawnSync(process.execPath, [cli, 'train', 'examples/smoke.yaml', 'gpu.memory=0.001', 'output.dir=/tmp/wgt-never'], { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /error: the update needs about .* GiB .* but the GPU memory budget is 0\.00 GiB; set a larger gpu\.memory/);
    assert.doesNotMatch(r.stdout, /GPU:/, 'refused before the GPU was started');
  });

  test('the buffer pool never holds more than its cap: free buffers go back first, then it refuses', async () => {
    const rt = await gpu();
    await rt.sync();
    rt.releaseCached();
    const limit = rt.pool.limit;
    const base = rt.pool.stats.allocated;
    try {
      rt.pool.limit = base + 3 * 2 ** 20;
      // 1 MiB tensors of a size class the pool holds nowhere else; freed ones must make room for another class.
      const a = tensor(new Float32Array(2 ** 18), [2 ** 18]);
      const b = tensor(new Float32Array(2 ** 18), [2 ** 18]);
      a.dispose();
      b.dispose();
      const c = tensor(new Float32Array(3 * 2 ** 18), [3 * 2 ** 18]);
      assert.ok(rt.pool.stats.allocated <= rt.pool.limit, `${rt.pool.stats.allocated} held, cap ${rt.pool.limit}`);
      assert.throws(() => tensor(new Float32Array(2 ** 18), [2 ** 18]), /GPU memory budget: .* needs 1\.0 MiB more .* over the budget of .* \(gpu\.memory, --gpu-memory\)/);
      assert.ok(rt.pool.stats.allocated <= rt.pool.limit);
      c.dispose();
    } finally {
      rt.pool.limit = limit;
    }
  });
});
