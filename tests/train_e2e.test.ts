// The trainer end to end on the software GPU: a tiny household model, two GRPO
// iterations writing metrics, trajectories, checkpoints and the report; then the same
// run stopped after one iteration (as if killed) and resumed, which must match it exactly.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { openCheckpoint } from '../src/hf_model/checkpoint.ts';
import { loadConfig } from '../src/config/config.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { Run } from '../src/run/run.ts';
import { train } from '../src/trainer/train.ts';
import { gpu } from './support/gpu.ts';
import { tinyHouseholdModel } from './support/tiny_household.ts';

// Time, throughput and GPU memory depend on the process, not on the training.
// What the run cost rather than what it computed: seconds, memory and the host's GPU counts (a resumed run's submits batch differently).
const timeKeys = (k: string) => k.startsWith('time/') || k.startsWith('throughput/') || k.startsWith('memory/') || k.startsWith('gpu/');
const stable = (row: Record<string, number | null>) => Object.fromEntries(Object.entries(row).filter(([k]) => !timeKeys(k)));

describe('training end to end', () => {
  test('two iterations write metrics, trajectories, checkpoints and a report; a resumed run matches', async () => {
    await gpu();
    const root = mkdtempSync(join(tmpdir(), 'wgt-train-'));
    const modelDir = join(root, 'model');
    await tinyHouseholdModel(modelDir);
    const settings = [
      `model.path=${modelDir}`, `output.dir=${root}`, 'output.progress=none', 'output.tensorboard=false',
      'rollout.tasksPerIteration=2', 'rollout.groupSize=2', 'rollout.maxTurns=2', 'rollout.maxResponseTokens=12',
      'optim.miniBatchSize=4', 'optim.microBatchTokens=4096', 'optim.lr=1e-3', 'optim.warmupIterations=2',
      'validation.tasks=1', 'validation.every=2', 'validation.atStart=false', 'checkpoint.every=1', 'checkpoint.keepLast=2',
    ];
    const quiet = { log: () => {} };

    const lines: string[] = [];
    const full = await train(loadConfig(undefined, [...settings, 'iterations=2', 'output.runName=full']), { log: (l) => lines.push(l) });
    const rows = readMetrics(join(full.runDir, 'metrics.jsonl'));
    // The household prompt re-renders its window of recent turns: one sequence per turn, said once while it stays so.
    assert.deepEqual(lines.filter((l) => l.startsWith('scoring and training:')).map((l) => l.replace(/ \(.*/, '')), ['scoring and training: one sequence per turn: the prompts re-render the history, not append-only']);
    assert.deepEqual([rows[0]['episodes/merged'], rows[0]['episodes/per_turn']], [0, 4]);
    assert.ok((rows[0]['tokens/scored_prompt'] as number) > 0 && rows[0]['tokens/response'] === rows[0]['tokens/trained']);
    assert.deepEqual(rows.map((r) => r.iteration), [1, 2]);
    for (const key of ['rollout/success', 'rollout/invalid_rate', 'actor/pg_loss', 'actor/kl', 'actor/entropy', 'actor/grad_norm', 'tokens/generated']) {
      assert.ok(typeof rows[1][key] === 'number', `metric ${key} logged`);
    }
    assert.ok(typeof rows[1]['val/success'] === 'number', 'validation ran at the last iteration');
    for (const phase of ['rollout', 'old_logprobs', 'update', 'validation']) assert.ok((rows[1][`memory/${phase}_peak_gib`] as number) > 0, `memory/${phase}_peak_gib`);
    for (const phase of ['rollout', 'old_logprobs', 'reference', 'update']) assert.ok((rows[1][`gpu/${phase}_dispatches`] as number) > 0, `gpu/${phase}_dispatches`);
    assert.ok((rows[1]['gpu/update_readbacks'] as number) >= (rows[1]['actor/steps'] as number), 'the update waits for the GPU at least once a step (its statistics)');
    assert.ok((rows[1]['gpu/rollout_submits'] as number) >= (rows[1]['gpu/rollout_readbacks'] as number));
    assert.equal(rows[1]['memory/peak_gib'], Math.max(...Object.entries(rows[1]).filter(([k]) => /^memory\/.+_peak_gib$/.test(k)).map(([, v]) => v as number)));
    // The learning rate warms up over iterations, not optimizer steps.
    assert.deepEqual(rows.map((r) => r['actor/lr']), [0, 5e-4]);
    assert.ok(existsSync(join(full.runDir, 'rollouts', 'iter-2.jsonl')));
    const traj = readFileSync(join(full.runDir, 'rollouts', 'iter-1.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(traj.length, 4, 'two tasks times two runs');
    assert.ok(traj.every((t) => t.turns.length >= 1 && t.turns.length <= 2));
    assert.deepEqual(readdirSync(join(full.runDir, 'checkpoints')).filter((n) => n.startsWith('ckpt-')).sort(), ['ckpt-1', 'ckpt-2']);
    assert.ok(existsSync(join(full.runDir, 'report.html')));

    // The same run stopped after one iteration, then resumed to two.
    const cut = await train(loadConfig(undefined, [...settings, 'iterations=2', 'output.runName=resumed']), { ...quiet, stopAfter: 1 });
    assert.equal(cut.iterations, 1);
    await train(loadConfig(undefined, [...settings, 'iterations=2', 'output.runName=resumed']), { ...quiet, resume: true });
    const resumedRows = readMetrics(join(cut.runDir, 'metrics.jsonl'));
    assert.deepEqual(resumedRows.map(stable), rows.map(stable));
    // Killed after iteration 2 wrote its trajectories but before it saved: the redone iteration's file holds each trajectory once.
    rmSync(join(cut.runDir, 'checkpoints', 'ckpt-2'), { recursive: true });
    writeFileSync(join(cut.runDir, 'checkpoints', 'latest'), 'ckpt-1\n');
    await train(loadConfig(undefined, [...settings, 'iterations=2', 'output.runName=resumed']), { ...quiet, resume: true });
    const redone = readFileSync(join(cut.runDir, 'rollouts', 'iter-2.jsonl'), 'utf8').trim().split('\n');
    assert.equal(redone.length, 4, 'two tasks times two runs, once');
    assert.deepEqual(readMetrics(join(cut.runDir, 'metrics.jsonl')).map(stable), rows.map(stable));
    const a = openCheckpoint(join(full.runDir, 'checkpoints', 'ckpt-2', 'model'));
    const b = openCheckpoint(join(cut.runDir, 'checkpoints', 'ckpt-2', 'model'));
    for (const name of a.names()) assert.deepEqual(b.read(name), a.read(name), `${name} after resume`);
    a.close();
    b.close();
  });
});

describe('an interrupted run', () => {
  test('Ctrl-C asks the run to stop after the iteration in hand; the run says so', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-interrupt-'));
    const lines: string[] = [];
    const run = new Run(loadConfig(undefined, [`output.dir=${root}`, 'output.progress=none', 'output.tensorboard=false']), { log: (l) => lines.push(l) });
    assert.equal(run.stopRequested, false);
    process.emit('SIGINT');
    assert.equal(run.stopRequested, true);
    assert.match(lines.join('\n'), /interrupted: finishing this iteration and saving a checkpoint \(Ctrl-C again, more than 1.5 s from now, to stop at once\)/);
    run.metrics.log(0, { 'val/success': 0 });
    run.finish(3, 10);
    assert.match(lines.join('\n'), /: stopped after iteration 3 of 10; continue with the same command and --resume\n {2}time {8}\d+ s for iterations 1-3 in this command\n {2}validation {2}success 0\.000 at iteration 0 \(final\), peak 0\.000 at iteration 0\n {2}report {6}.*report\.html$/);
    assert.equal(process.listenerCount('SIGINT'), 0, 'the run lets go of Ctrl-C when it ends');
  });
});
