// SFT as a training run on the software GPU with a tiny household model: the expert's
// episodes as data, metrics with a falling loss, validation on the seeded panel, a
// checkpoint that reloads with the trained weights, and the report; LoRA on a JSONL
// file of trajectory records (lost episodes left out); a bad data file fails naming
// the file and line before anything is written.

import { envPlugin } from '../envs/registry.ts';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { HouseholdEnvironment } from '../envs/household/index.ts';
import { openCheckpoint } from '../src/hf_model/checkpoint.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import { findLatestCheckpoint, loadCheckpoint, restoreModel } from '../src/checkpoint/checkpoint.ts';
import { loadConfig } from '../src/config/config.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { GIB, planMemory } from '../src/memory/memory_plan.ts';
import { planInput } from '../src/run/memory.ts';
import { runSft } from '../src/sft/sft_run.ts';
import { lazyTinyHouseholdModel } from './support/tiny_household.ts';

// The software GPU is slow and shared: GPU tests get minutes, not bun's default 5 s.
const slow = { timeout: 600_000 };

const root = mkdtempSync(join(tmpdir(), 'wgt-sft-run-'));
after(() => rmSync(root, { recursive: true, force: true }));

const tinyModel = lazyTinyHouseholdModel(root);

const quiet = { log: () => {} };

function settings(model: string, runName: string): string[] {
  return [
    'method=sft', `model.path=${model}`, `output.dir=${root}`, `output.runName=${runName}`, 'output.progress=none', 'output.tensorboard=false',
    'rollout.maxTurns=1', 'rollout.maxResponseTokens=8', 'optim.microBatchTokens=4096', 'validation.tasks=1',
  ];
}

describe('runSft', () => {
  test('one epoch on expert episodes: falling loss, validation, a checkpoint with the trained weights, the report', slow, async () => {
    const model = await tinyModel();
    const cfg = loadConfig(undefined, [...settings(model, 'expert'), 'algorithm.sft.episodes=2', 'optim.miniBatchSize=4', 'optim.lr=1e-2']);
    const result = await runSft(cfg, quiet);

    const rows = readMetrics(join(result.runDir, 'metrics.jsonl'));
    assert.equal(rows[0].iteration, 0);
    assert.equal(typeof rows[0]['val/success'], 'number', 'validation before training (validation.atStart)');
    const steps = rows.slice(1);
    assert.ok(result.iterations >= 3, `${result.iterations} steps`);
    assert.deepEqual(steps.map((r) => r.iteration), Array.from({ length: result.iterations }, (_, i) => i + 1));
    for (const key of ['sft/loss', 'sft/epoch', 'actor/lr', 'actor/grad_norm', 'tokens/trained', 'throughput/tokens_per_s']) {
      assert.ok(steps.every((r) => typeof r[key] === 'number'), `${key} on every step`);
    }
    const losses = steps.map((r) => r['sft/loss'] as number);
    assert.ok(losses[losses.length - 1] < losses[0], `loss ${losses.map((l) => l.toFixed(3)).join(' ')}`);
    assert.ok(Math.abs((steps[steps.length - 1]['sft/epoch'] as number) - 1) < 1e-9, 'one epoch');
    assert.equal(typeof steps[steps.length - 1]['val/success'], 'number', 'validation after the last step');
    assert.equal(result.lastMetrics['sft/loss'], losses[losses.length - 1]);
    assert.ok(existsSync(join(result.runDir, 'rollouts', 'val-0.jsonl')));
    assert.ok(existsSync(join(result.runDir, 'report.html')));
    assert.equal(JSON.parse(readFileSync(join(result.runDir, 'config.json'), 'utf8')).method, 'sft');

    const where = findLatestCheckpoint(join(result.runDir, 'checkpoints'));
    assert.ok(where, 'a checkpoint');
    const ckpt = loadCheckpoint(where);
    assert.equal(ckpt.iteration, result.iterations);
    assert.equal(ckpt.model.kind, 'full');
    const before = openCheckpoint(model);
    const after_ = openCheckpoint(join(where, 'model'));
    const name = 'model.embed_tokens.weight';
    assert.notDeepEqual(after_.read(name), before.read(name), 'training changed the weights');
    before.close();
    after_.close();
    const reloaded = restoreModel(ckpt, { trainable: false });
    assert.equal(reloaded.config.vocabSize, (await loadTokenizer(model)).vocabSize);
    for (const p of reloaded.parameters()) p.dispose();
  });

  test('LoRA on a JSONL of trajectory records, two epochs; lost episodes are left out', slow, async () => {
    const model = await tinyModel();
    const tokenizer = await loadTokenizer(model);
    const spec = envPlugin('household').agent;
    const { trajectories } = await runRollout({
      spec, env: new HouseholdEnvironment(), engine: new ExpertEngine(tokenizer, spec), tokenizer, tasks: [{ split: 'train', seed: 7 }, { split: 'train', seed: 8 }],
      groupSize: 1, maxPromptTokens: 2048, maxResponseTokens: 64,
    });
    const lost = { ...trajectories[1], won: false };
    const file = join(root, 'records.jsonl');
    writeFileSync(file, [trajectories[0], lost].map((t) => JSON.stringify(t)).join('\n') + '\n\n');
    const lines: string[] = [];
    const cfg = loadConfig(undefined, [
      ...settings(model, 'lora'), `algorithm.sft.data=${file}`, 'algorithm.sft.epochs=2', 'model.lora={"r":2,"alpha":4,"targetModules":["q_proj","v_proj"]}',
      'optim.miniBatchSize=2', 'optim.lr=1e-2', 'validation.atStart=false',
    ]);
    const result = await runSft(cfg, { log: (l) => lines.push(l) });
    const turns = trajectories[0].turns.filter((t) => t.valid).length;
    assert.ok(lines.some((l) => l.includes(`sft data: ${turns} turns from ${file}`) && l.includes('left out 1 lost or failed episodes')), lines.join('\n'));
    const rows = readMetrics(join(result.runDir, 'metrics.jsonl'));
    assert.equal(rows[0].iteration, 1, 'no validation before training');
    assert.ok(Math.abs((rows[rows.length - 1]['sft/epoch'] as number) - 2) < 1e-9, 'two epochs');
    const ckpt = loadCheckpoint(findLatestCheckpoint(join(result.runDir, 'checkpoints'))!);
    assert.equal(ckpt.model.kind, 'lora');
    const reloaded = restoreModel(ckpt);
    assert.equal(reloaded.lora.size, 2, 'q_proj and v_proj of the one layer');
    const b = await [...reloaded.lora.values()][0].b.toArray();
    assert.ok(Array.from(b).some((v) => v !== 0), 'the adapter trained (B left zero)');
    for (const p of [...reloaded.parameters(), ...[...reloaded.lora.values()].flatMap((l) => [l.a, l.b])]) p.dispose();
  });

  test('SFT runs within its memory plan: layers checkpointed and micro-batches cut to fit the budget, the same losses, each row\'s memory within it', slow, async () => {
    const model = await tinyModel();
    const base = [...settings(model, 'roomy'), 'algorithm.sft.episodes=2', 'optim.miniBatchSize=8', 'optim.lr=1e-2', 'checkpoint.every=0', 'validation.atStart=false'];
    const roomy = loadConfig(undefined, base);
    // The budget that holds the update with checkpointed layers at 2,048 tokens a pass, not at optim.microBatchTokens 4,096.
    const need = planMemory({ ...planInput(roomy), microBatchTokens: 2048, budgetBytes: 1e12, checkpointing: 'on' }).updateBytes;
    const gib = (need * 1.01) / GIB;
    const tight = loadConfig(undefined, [...base.map((s) => s.replace('runName=roomy', 'runName=tight')), `gpu.memory=${gib}`]);
    const lines: string[] = [];
    const planned = await runSft(tight, { log: (l) => lines.push(l) });
    const log = lines.join('\n');
    assert.match(log, /GPU memory budget .* \(micro-batches of up to 2048 tokens, checkpointed layers\)/);
    assert.match(log, /memory: layers checkpointed in the update/);
    assert.match(log, /memory: update micro-batches of 2048 tokens, not optim\.microBatchTokens 4096/);
    const rows = readMetrics(join(planned.runDir, 'metrics.jsonl'));
    for (const r of rows) {
      assert.ok((r['memory/update_peak_gib'] as number) > 0 && (r['memory/update_peak_gib'] as number) <= gib * 1.125, `step ${r.iteration}: ${r['memory/update_peak_gib']} GiB held, budget ${gib}`);
    }
    assert.equal(typeof rows[rows.length - 1]['memory/validation_peak_gib'], 'number');
    const plain = readMetrics(join((await runSft(roomy, quiet)).runDir, 'metrics.jsonl'));
    assert.equal(plain.length, rows.length);
    rows.forEach((r, i) => assert.ok(Math.abs((r['sft/loss'] as number) - (plain[i]['sft/loss'] as number)) < 1e-5, `step ${i + 1}: ${r['sft/loss']} against ${plain[i]['sft/loss']}`));
  });

  test('a bad data file or an unsupported option fails before anything is written', slow, async () => {
    const model = join(root, 'model-unused');
    const file = join(root, 'bad.jsonl');
    const record = { trajectoryId: 't', groupId: 'g', task: 'x', taskType: 'pick_and_place', split: 'train', seed: 1, won: true, episodeReturn: 10, truncated: false };
    writeFileSync(file, `${JSON.stringify({ ...record, turns: [{ prompt: 'p', response: 'r' }] })}\n{"turns": [\n`);
    const cfgFor = (name: string, extra: string[] = []) => loadConfig(undefined, [...settings(model, name), `algorithm.sft.data=${file}`, ...extra]);
    // The model path is checked first; point it at the tiny model only where the data is the failure.
    const real = await tinyModel();
    const withModel = (name: string, extra: string[] = []) => loadConfig(undefined, [...settings(real, name), `algorithm.sft.data=${file}`, ...extra]);
    await assert.rejects(runSft(withModel('bad-json'), quiet), new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: not JSON`));
    assert.ok(!existsSync(join(root, 'bad-json')), 'no run directory');
    writeFileSync(file, `${JSON.stringify({ ...record, turns: [{ prompt: 'p', response: 'r' }] })}\n${JSON.stringify({ ...record, turns: [{ prompt: 'p' }] })}\n`);
    await assert.rejects(runSft(withModel('bad-turn'), quiet), /bad\.jsonl:2: turns\[0\]\.response must be a non-empty string, got nothing/);
    // A conversation's turns hold only their new user message: not a prompt to imitate on its own.
    writeFileSync(file, `${JSON.stringify({ ...record, history: 'conversation', turns: [{ prompt: 'p', response: 'r' }] })}\n`);
    await assert.rejects(runSft(withModel('chat'), quiet), /bad\.jsonl:1: history must be absent \(SFT trains on window prompts; this episode was a conversation/);
    writeFileSync(file, `${JSON.stringify({ ...record, turns: [{ prompt: 'p', response: 'r', responseIds: [3, -1] }] })}\n`);
    await assert.rejects(runSft(withModel('bad-ids'), quiet), /bad\.jsonl:1: turns\[0\]\.responseIds must be a non-empty list of token ids when present, got \[3,-1\]/);
    writeFileSync(file, `${JSON.stringify({ ...record, thinking: 'on', turns: [{ prompt: 'p', response: 'r', responseIds: [3] }] })}\n`);
    await assert.rejects(runSft(withModel('other-thinking'), quiet), /sampled with model\.thinking=on, and this run renders prompts with model\.thinking=off; set model\.thinking=on/);
    assert.ok(!existsSync(join(root, 'other-thinking')), 'no run directory');
    await assert.rejects(runSft(cfgFor('no-model'), quiet), /model\.path: .*model-unused is not a Hugging Face model directory/);
    await assert.rejects(runSft(loadConfig(undefined, settings(real, 'resume')), { ...quiet, resume: true }), /--resume: there is no run in .*resume to continue/);
    await assert.rejects(runSft(withModel('linear', ['optim.schedule=linear']), quiet), /optim\.schedule: method sft supports "constant" and "cosine"/);
    await assert.rejects(runSft(loadConfig(undefined, [...settings(real, 'grpo'), 'method=grpo']), quiet), /runSft runs supervised fine-tuning, and grpo trains by rl/);
  });

  test('an SFT run stopped after a step and resumed matches the uninterrupted run', slow, async () => {
    const model = await tinyModel();
    const base = [...settings(model, 'whole'), 'algorithm.sft.episodes=2', 'optim.miniBatchSize=4', 'optim.lr=1e-2', 'checkpoint.every=0'];
    const whole = await runSft(loadConfig(undefined, base), quiet);
    const name = (n: string) => base.map((s) => (s.startsWith('output.runName=') ? `output.runName=${n}` : s));
    const cut = await runSft(loadConfig(undefined, name('cut')), { ...quiet, stopAfter: 1 });
    assert.equal(cut.iterations, 1);
    assert.ok(findLatestCheckpoint(join(cut.runDir, 'checkpoints')), 'stopping early saves a checkpoint');
    const resumed = await runSft(loadConfig(undefined, name('cut')), { ...quiet, resume: true });
    assert.equal(resumed.iterations, whole.iterations);
    // Time and GPU memory depend on what ran before in the process, not on the run.
    const stable = (rows: Record<string, number | null>[]) => rows.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !/^(time|throughput|memory)\//.test(k))));
    assert.deepEqual(stable(readMetrics(join(cut.runDir, 'metrics.jsonl'))), stable(readMetrics(join(whole.runDir, 'metrics.jsonl'))));
    const a = openCheckpoint(join(findLatestCheckpoint(join(whole.runDir, 'checkpoints'))!, 'model'));
    const b = openCheckpoint(join(findLatestCheckpoint(join(cut.runDir, 'checkpoints'))!, 'model'));
    for (const n of a.names()) assert.deepEqual(b.read(n), a.read(n), `${n} after resume`);
    a.close();
    b.close();
  });
});
