// Training checkpoints on the tiny Qwen3 fixture: full and LoRA round trips (weights,
// AdamW moments, trainer state), keep-last-K, the latest pointer and its fallbacks, a
// full disk mid-save leaving the last good checkpoint intact, and damaged checkpoints
// refused with the file named.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadModel } from '../src/models/load.ts';
import { attachLora, loraParameters } from '../src/lora/lora.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { AdamW } from '../src/optim/adamw.ts';
import {
  assertResumable, findLatestCheckpoint, LATEST_FILE, listCheckpoints, loadCheckpoint, restoreModel, saveCheckpoint, type CheckpointIO, type TrainerState,
} from '../src/checkpoint/checkpoint.ts';
import { randn, Rng } from '../src/util/random.ts';
import { validateConfig } from '../src/config/config.ts';
import type { Tensor } from '../src/tensor/tensor.ts';
import { gpu, read } from './support/gpu.ts';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'qwen3-tiny');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trainer-ckpt-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const root = () => path.join(tmp, `ckpts${n++}`);

/** Overwrites every tensor with seeded noise, so saved values cannot come from the fixture by accident. */
async function scramble(params: readonly Tensor[], seed: number): Promise<void> {
  const rt = (await gpu());
  params.forEach((p, i) => rt.upload(p.buffer, 0, randn(p.size, seed * 1000 + i, 0.05)));
}

async function values(params: readonly Tensor[]): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const p of params) out.set(p.name!, await read(p));
  return out;
}

function optimizerWithState(params: readonly Tensor[], seed: number, step: number): AdamW {
  const opt = new AdamW(params, { lr: 1e-3 });
  const state: Record<string, Float32Array> = { step: Float32Array.of(step) };
  params.forEach((p, i) => {
    state[`${p.name}.exp_avg`] = randn(p.size, seed + 2 * i, 0.01);
    state[`${p.name}.exp_avg_sq`] = randn(p.size, seed + 2 * i + 1, 0.01).map(Math.abs);
  });
  opt.loadStateDict(state);
  return opt;
}

function trainerState(iteration: number): TrainerState {
  const tasks = Rng.seeded(3, 'tasks');
  for (let i = 0; i < iteration; i++) tasks.next();
  return { iteration, configHash: 'abc123', rng: { tasks: tasks.state(), engine: Rng.seeded(3, 'engine').state() }, metrics: { 'val/success': 0.25 }, bestVal: 0.5 };
}

let fullModel: QwenModel | null = null;
async function model(): Promise<QwenModel> {
  await gpu();
  if (!fullModel) {
    fullModel = loadModel(FIXTURE);
    await scramble(fullModel.parameters(), 1);
  }
  return fullModel;
}

const enospc = (failOn: (file: string) => boolean): CheckpointIO => ({
  writeFile(file, contents) {
    if (failOn(file)) throw Object.assign(new Error(`ENOSPC: no space left on device, write '${file}'`), { code: 'ENOSPC' });
    fs.writeFileSync(file, contents);
  },
});

describe('training checkpoints', () => {
  test('full model: weights, optimizer moments and trainer state round-trip', async () => {
    const m = await model();
    const opt = optimizerWithState(m.parameters(), 10, 7);
    const r = root();
    const dir = await saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState: await opt.stateDict(), trainerState: trainerState(12) });
    assert.equal(dir, path.join(r, 'ckpt-12'));
    assert.equal(fs.readFileSync(path.join(r, LATEST_FILE), 'utf8'), 'ckpt-12\n');
    assert.equal(findLatestCheckpoint(r), dir);

    const ck = loadCheckpoint(dir);
    assert.equal(ck.iteration, 12);
    assert.deepEqual(ck.trainerState, JSON.parse(JSON.stringify(trainerState(12))));
    // The saved generator continues the stream where the run left it.
    const live = Rng.seeded(3, 'tasks');
    for (let i = 0; i < 12; i++) live.next();
    assert.equal(Rng.fromState(ck.trainerState.rng.tasks).nextU32(), live.nextU32());

    const restored = restoreModel(ck);
    const [want, got] = [await values(m.parameters()), await values(restored.parameters())];
    assert.deepEqual([...got.keys()], [...want.keys()]);
    for (const [name, v] of want) assert.deepEqual(got.get(name), v, name);
    const opt2 = new AdamW(restored.parameters(), { lr: 1e-3 });
    opt2.loadStateDict(ck.optimizerState);
    assert.equal(opt2.stepCount, 7);
    const [a, b] = [await opt.stateDict(), await opt2.stateDict()];
    for (const k of Object.keys(a)) assert.deepEqual(b[k], a[k], k);
    opt.dispose();
    opt2.dispose();
    for (const p of restored.parameters()) p.dispose();
  });

  test('LoRA: the adapter and the base path are saved; restore attaches it to the base', async () => {
    await gpu();
    const m = loadModel(FIXTURE);
    attachLora(m, { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj'], baseModel: null }, 5);
    await scramble(loraParameters(m), 2);
    const opt = optimizerWithState(loraParameters(m), 30, 3);
    const r = root();
    const dir = await saveCheckpoint(r, { model: { kind: 'lora', model: m, basePath: FIXTURE }, optimizerState: await opt.stateDict(), trainerState: trainerState(4) });
    assert.ok(fs.existsSync(path.join(dir, 'adapter', 'adapter_model.safetensors')));
    assert.ok(!fs.existsSync(path.join(dir, 'model')));
    const ck = loadCheckpoint(dir);
    assert.deepEqual(ck.model, { kind: 'lora', adapterDir: path.join(dir, 'adapter'), basePath: path.resolve(FIXTURE) });
    const restored = restoreModel(ck);
    const [want, got] = [await values(loraParameters(m)), await values(loraParameters(restored))];
    assert.ok(want.size > 0);
    assert.equal(got.size, want.size);
    for (const [name, v] of want) assert.deepEqual(got.get(name), v, name);
    const opt2 = new AdamW(loraParameters(restored), { lr: 1e-3 });
    opt2.loadStateDict(ck.optimizerState);
    assert.equal(opt2.stepCount, 3);
    await assert.rejects(
      saveCheckpoint(root(), { model: { kind: 'full', model: m }, optimizerState: {}, trainerState: trainerState(1) }),
      /LoRA adapters attached/,
    );
    opt.dispose();
    opt2.dispose();
    for (const x of [...m.parameters(), ...loraParameters(m), ...restored.parameters(), ...loraParameters(restored)]) x.dispose();
  });

  test('keeps the last K, moves the pointer, falls back when the pointer is missing or stale', async () => {
    const m = await model();
    const r = root();
    const optimizerState = { step: Float32Array.of(1) };
    for (const it of [1, 2, 3, 4]) await saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState, trainerState: trainerState(it) }, { keepLast: 2 });
    assert.deepEqual(listCheckpoints(r), [3, 4]);
    assert.deepEqual(fs.readdirSync(r).sort(), ['ckpt-3', 'ckpt-4', 'latest']);
    assert.equal(findLatestCheckpoint(r), path.join(r, 'ckpt-4'));
    // Saving an iteration again replaces it in place.
    await saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState, trainerState: { ...trainerState(4), note: 'again' } }, { keepLast: 2 });
    assert.equal(loadCheckpoint(path.join(r, 'ckpt-4')).trainerState.note, 'again');
    assert.deepEqual(listCheckpoints(r), [3, 4]);
    // The pointer wins over the highest number (a run resumed from an earlier checkpoint).
    fs.writeFileSync(path.join(r, LATEST_FILE), 'ckpt-3\n');
    assert.equal(findLatestCheckpoint(r), path.join(r, 'ckpt-3'));
    fs.writeFileSync(path.join(r, LATEST_FILE), 'ckpt-9\n');
    assert.equal(findLatestCheckpoint(r), path.join(r, 'ckpt-4'));
    fs.rmSync(path.join(r, LATEST_FILE));
    assert.equal(findLatestCheckpoint(r), path.join(r, 'ckpt-4'));
    assert.equal(findLatestCheckpoint(path.join(tmp, 'none')), null);
    // A temporary directory of a process that died mid-save is cleared by the next save.
    fs.mkdirSync(path.join(r, 'ckpt-5.tmp-2147483646'));
    await saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState, trainerState: trainerState(5) }, { keepLast: 2 });
    assert.deepEqual(fs.readdirSync(r).sort(), ['ckpt-4', 'ckpt-5', 'latest']);
  });

  test('a full disk mid-save leaves the last good checkpoint and the pointer intact', async () => {
    const m = await model();
    const r = root();
    const optimizerState = { step: Float32Array.of(2) };
    await saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState, trainerState: trainerState(4) }, { keepLast: 1 });
    const before = fs.readdirSync(path.join(r, 'ckpt-4'), { recursive: true }).sort();
    for (const failing of ['trainer_state.json', LATEST_FILE]) {
      await assert.rejects(
        saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState, trainerState: trainerState(5) }, { keepLast: 1, io: enospc((f) => path.basename(f).startsWith(failing)) }),
        (e: Error) => {
          assert.match(e.message, /saving checkpoint .*ckpt-5 failed: the disk is full \(ENOSPC/);
          assert.ok(e.message.includes(`the last good checkpoint ${path.join(r, 'ckpt-4')} is intact`), e.message);
          return true;
        },
      );
      assert.deepEqual(fs.readdirSync(r).sort(), ['ckpt-4', 'latest'], `after failing on ${failing}`);
      assert.deepEqual(fs.readdirSync(path.join(r, 'ckpt-4'), { recursive: true }).sort(), before);
      assert.equal(findLatestCheckpoint(r), path.join(r, 'ckpt-4'));
      assert.equal(loadCheckpoint(path.join(r, 'ckpt-4')).iteration, 4);
    }
    await assert.rejects(
      saveCheckpoint(root(), { model: { kind: 'full', model: m }, optimizerState, trainerState: trainerState(1) }, { io: enospc(() => true) }),
      /there is no earlier checkpoint/,
    );
  });

  test('damaged checkpoints are refused naming the file', async () => {
    const m = await model();
    const r = root();
    const dir = await saveCheckpoint(r, { model: { kind: 'full', model: m }, optimizerState: await optimizerWithState(m.parameters(), 50, 1).stateDict(), trainerState: trainerState(2) });
    const copy = (name: string) => {
      const d = path.join(tmp, name);
      fs.cpSync(dir, d, { recursive: true });
      return d;
    };
    const truncated = copy('truncated');
    const opt = path.join(truncated, 'optimizer.safetensors');
    fs.truncateSync(opt, fs.statSync(opt).size - 4);
    assert.throws(() => loadCheckpoint(truncated), (e: Error) => e.message.startsWith(`${opt}: `) && /bytes, but checkpoint\.json says/.test(e.message));
    const noManifest = copy('no-manifest');
    fs.rmSync(path.join(noManifest, 'checkpoint.json'));
    assert.throws(() => loadCheckpoint(noManifest), /checkpoint\.json: not found \(an incomplete checkpoint/);
    const badState = copy('bad-state');
    const statePath = path.join(badState, 'trainer_state.json');
    const state = JSON.parse(fs.readFileSync(statePath, 'utf8'));
    state.rng.tasks = [1, 2];
    const text = JSON.stringify(state);
    // Same size as before, so the manifest's size check passes and the content check speaks.
    fs.writeFileSync(statePath, text.padEnd(fs.statSync(statePath).size, ' '));
    assert.throws(() => loadCheckpoint(badState), (e: Error) => e.message.startsWith(statePath) && /rng\.tasks must be four unsigned 32-bit integers/.test(e.message));
    const noModel = copy('no-model');
    fs.rmSync(path.join(noModel, 'model', 'config.json'));
    assert.throws(() => loadCheckpoint(noModel), /model\/config\.json: missing \(listed in checkpoint\.json\)/);
    assert.throws(() => loadCheckpoint(path.join(tmp, 'nowhere')), /checkpoint directory not found/);
    const cfg = validateConfig({});
    assertResumable(loadCheckpoint(dir).trainerState, 'abc123', dir, cfg);
    assert.throws(() => assertResumable(loadCheckpoint(dir).trainerState, 'zzz', dir, cfg), /another configuration; its config hash is abc123, this run's zzz/);
  });
});
