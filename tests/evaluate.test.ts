// Standalone evaluation on the software GPU with a tiny random household model: the
// report's statistics agree with the per-episode outcomes it records (and with the
// trajectory log), seeds sample differently while greedy runs repeat, a LoRA
// checkpoint and a run directory load, and bad input fails naming the option.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadModel } from '../src/models/load.ts';
import { attachLora } from '../src/lora/lora.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { saveCheckpoint } from '../src/checkpoint/checkpoint.ts';
import { validateConfig, writeRunConfig } from '../src/config/config.ts';
import { evaluate, type EvalOptions, type EvalReport } from '../src/eval/evaluate.ts';
import { gpu } from './support/gpu.ts';
import { lazyTinyHouseholdModel } from './support/tiny_household.ts';

// The software GPU is slow and shared: GPU tests get minutes, not bun's default 5 s.
const slow = { timeout: 600_000 };

const root = mkdtempSync(join(tmpdir(), 'wgt-eval-'));
after(() => rmSync(root, { recursive: true, force: true }));

const tinyModel = lazyTinyHouseholdModel(root);

const quiet = { progress: 'none', log: () => {} } as const;
const small: Partial<EvalOptions> = { maxTurns: 2, maxResponseTokens: 6, ...quiet };

/** C(n, k) for the small n of these tests. */
function choose(n: number, k: number): number {
  if (k > n) return 0;
  let r = 1;
  for (let i = 0; i < k; i++) r = (r * (n - i)) / (i + 1);
  return r;
}

function firstResponses(file: string): string[] {
  return readTrajectoryLog(file).map((t) => t.turns[0].response);
}

describe('evaluate', () => {
  test('two seeds x two tasks: mean ± std and pass@k agree with the recorded episodes; seeds sample differently', slow, async () => {
    const model = await tinyModel();
    const out = join(root, 'eval', 'report.json');
    const trajectories = join(root, 'eval', 'trajectories.jsonl');
    const report = await evaluate({ ...small, model, seeds: 2, tasks: 2, temperature: 1, out, trajectories });

    assert.equal(report.env, 'household');
    assert.equal(report.split, 'valid_seen');
    assert.deepEqual(report.ks, [1, 2]);
    assert.equal(report.episodes.length, 4);
    assert.deepEqual(report.episodes.map((e) => [e.taskId, e.seed]), [
      ['valid_seen:1000000', 0], ['valid_seen:1000000', 1], ['valid_seen:1000001', 0], ['valid_seen:1000001', 1],
    ]);
    for (const e of report.episodes) assert.ok(e.turns >= 1 && e.turns <= 2, `${e.turns} turns`);

    // The statistics, recomputed from the episodes by hand.
    const rates = [0, 1].map((s) => report.episodes.filter((e) => e.seed === s && e.won).length / 2);
    const mean = (rates[0] + rates[1]) / 2;
    assert.equal(report.summary.success.mean, mean);
    assert.equal(report.summary.success.std, Math.sqrt((rates[0] - mean) ** 2 + (rates[1] - mean) ** 2));
    assert.equal(report.summary.success.n, 2);
    for (const k of [1, 2]) {
      const perTask = ['valid_seen:1000000', 'valid_seen:1000001'].map((id) => {
        const c = report.episodes.filter((e) => e.taskId === id && e.won).length;
        return 1 - choose(2 - c, k) / choose(2, k);
      });
      assert.equal(report.summary.passAtK[k], (perTask[0] + perTask[1]) / 2, `pass@${k}`);
    }
    assert.equal(report.summary.score, null, 'household has no native score');
    const types = Object.values(report.summary.byType);
    assert.equal(types.reduce((n, g) => n + g.episodes, 0), 4);

    // The JSON file holds the same report, and the trajectory log the same episodes.
    const saved = JSON.parse(readFileSync(out, 'utf8')) as EvalReport;
    assert.deepEqual(saved.episodes, report.episodes);
    assert.deepEqual(saved.summary.passAtK, report.summary.passAtK);
    const log = readTrajectoryLog(trajectories);
    assert.deepEqual(log.map((t) => [t.won, t.turns.length, t.taskType]), report.episodes.map((e) => [e.won, e.turns, e.taskType]));
    // Seed 0 and seed 1 of a task see the same first prompt but sample their own tokens.
    assert.equal(log[0].turns[0].prompt, log[1].turns[0].prompt);
    assert.notEqual(log[0].turns[0].response, log[1].turns[0].response);

    // Decoding one episode at a time changes the speed, not the episodes.
    const single = join(root, 'eval', 'single.jsonl');
    const one = await evaluate({ ...small, model, seeds: 2, tasks: 2, temperature: 1, maxBatch: 1, trajectories: single });
    assert.deepEqual(one.episodes, report.episodes);
    assert.deepEqual(readTrajectoryLog(single).map((t) => t.turns.map((u) => u.response)), log.map((t) => t.turns.map((u) => u.response)));
  });

  test('greedy runs repeat across seeds; a LoRA checkpoint and a run directory load and reproduce the base model', slow, async () => {
    const model = await tinyModel();
    const baseLog = join(root, 'greedy-base.jsonl');
    await evaluate({ ...small, model, seeds: 2, tasks: 1, temperature: 0, trajectories: baseLog });
    const base = firstResponses(baseLog);
    assert.equal(base[0], base[1], 'greedy is the same for every seed');

    // A fresh adapter (B = 0) leaves the outputs unchanged; a full checkpoint of the same weights too.
    const weights = loadModel(model, { trainable: false });
    const runDir = join(root, 'run');
    const full = await saveCheckpoint(join(runDir, 'checkpoints'), {
      model: { kind: 'full', model: weights, tokenizerDir: model }, optimizerState: {}, trainerState: { iteration: 5, configHash: 'test', rng: {} },
    });
    attachLora(weights, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'], useRslora: false, baseModel: model }, 1);
    const lora = await saveCheckpoint(join(root, 'lora', 'checkpoints'), {
      model: { kind: 'lora', model: weights, basePath: model }, optimizerState: {}, trainerState: { iteration: 3, configHash: 'test', rng: {} },
    });
    for (const p of [...weights.parameters(), ...[...weights.lora.values()].flatMap((l) => [l.a, l.b])]) p.dispose();

    const loraLog = join(root, 'greedy-lora.jsonl');
    const fromLora = await evaluate({ ...small, model: lora, seeds: 2, tasks: 1, temperature: 0, trajectories: loraLog });
    assert.equal(fromLora.model.kind, 'checkpoint');
    assert.equal(fromLora.model.iteration, 3);
    assert.ok(fromLora.model.adapter?.endsWith('adapter'));
    assert.deepEqual(firstResponses(loraLog), base);

    // A run directory: its latest checkpoint, and its configuration's budgets as defaults.
    writeRunConfig(runDir, validateConfig({ rollout: { maxTurns: 1, maxResponseTokens: 6 }, validation: { tasks: 1 } }));
    const runLog = join(root, 'greedy-run.jsonl');
    const fromRun = await evaluate({ model: runDir, seeds: 2, temperature: 0, trajectories: runLog, ...quiet });
    assert.equal(fromRun.model.kind, 'run');
    assert.equal(fromRun.model.checkpoint, full);
    assert.equal(fromRun.model.iteration, 5);
    assert.equal(fromRun.maxTurns, 1, "the run's rollout.maxTurns");
    assert.equal(fromRun.tasks, 1, "the run's validation.tasks");
    assert.ok(fromRun.episodes.every((e) => e.turns === 1));
    assert.deepEqual(firstResponses(runLog), base);
  });

  test('bad input fails before any GPU work, naming the option', slow, async () => {
    const model = await tinyModel();
    const missing = join(root, 'nowhere');
    await assert.rejects(evaluate({ model: missing, ...quiet }), /model .*nowhere: no such directory/);
    const empty = join(root, 'empty');
    mkdirSync(empty);
    await assert.rejects(evaluate({ model: empty, ...quiet }), /not a Hugging Face model directory \(config\.json\), a training checkpoint .* or a run directory/);
    const noCkpt = join(root, 'run-without-checkpoints');
    mkdirSync(join(noCkpt, 'checkpoints'), { recursive: true });
    await assert.rejects(evaluate({ model: noCkpt, ...quiet }), /a run directory with no complete checkpoint/);
    await assert.rejects(evaluate({ model, seeds: 0, ...quiet }), /seeds: expected an integer >= 1, got 0/);
    await assert.rejects(evaluate({ model, seeds: 2, ks: [1, 4], ...quiet }), /ks: pass@4 needs at least 4 runs per task, but seeds is 2/);
    await assert.rejects(evaluate({ model, maxBatch: 0, ...quiet }), /maxBatch: expected an integer >= 1, got 0/);
    // A budget that holds no decoding row is refused from config.json, before the weights are on the GPU.
    const rt = await gpu();
    await rt.sync();
    const held = rt.pool.stats.inUse;
    rt.pool.resetPeaks();
    await assert.rejects(evaluate({ model, memoryBytes: 1024, ...quiet }), /one rollout row of \d+ tokens needs about .* over the GPU memory budget of 0\.00 GiB; set a larger gpu\.memory \(--gpu-memory\)/);
    assert.equal(rt.pool.stats.peakInUse, held, 'no weights were loaded');

    const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;
    const noModel = spawnSync(process.execPath, [cli, 'eval', missing], { encoding: 'utf8' });
    assert.notEqual(noModel.status, 0);
    assert.match(noModel.stderr, /error: MODEL .*nowhere: no such directory/);
    const badK = spawnSync(process.execPath, [cli, 'eval', model, '--seeds', '2', '--k', '1,4'], { encoding: 'utf8' });
    assert.notEqual(badK.status, 0);
    assert.match(badK.stderr, /--k 1,4: pass@4 needs at least 4 runs per task, but --seeds is 2/);
    const badSeeds = spawnSync(process.execPath, [cli, 'eval', model, '--seeds', '0'], { encoding: 'utf8' });
    assert.match(badSeeds.stderr, /--seeds 0: expected an integer >= 1/);
    const badBatch = spawnSync(process.execPath, [cli, 'eval', model, '--max-batch', '0'], { encoding: 'utf8' });
    assert.match(badBatch.stderr, /--max-batch 0: expected an integer >= 1/);
  });
});

describe('eval through the CLI', () => {
  test('a log gets how many episodes are done and how long the rest will take', slow, async () => {
    // A run whose episodes go two at a time, so they finish in waves and the pace shows before the end.
    const micro = new URL('../models/household-micro', import.meta.url).pathname;
    const run = join(root, 'paced-run');
    await gpu();
    const weights = loadModel(micro, { trainable: false });
    await saveCheckpoint(join(run, 'checkpoints'), {
      model: { kind: 'full', model: weights, tokenizerDir: micro }, optimizerState: {}, trainerState: { iteration: 1, configHash: 'test', rng: {} },
    });
    for (const p of weights.parameters()) p.dispose();
    writeRunConfig(run, validateConfig({ model: { path: micro }, rollout: { concurrency: 2, maxTurns: 2, maxResponseTokens: 8 }, validation: { tasks: 4 } }));
    const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;
    const r = spawnSync(process.execPath, [cli, 'eval', run, '--seeds', '2', '--progress', 'plain'], { encoding: 'utf8', env: { ...process.env, EGL_PLATFORM: 'surfaceless' } });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^eval [1-7]\/8 \d+\.\ds, about \d[\w ]* left /m);
    assert.match(r.stdout, /^eval 8\/8 \d+\.\ds /m);
  });
});
