// The first run on a fresh machine, through the CLI as a user types it, from a copy of
// the project whose node_modules lacks the native packages a tokenizer library once
// dragged in (onnxruntime, sharp, transformers.js itself): `train` loads the bundled
// model and its tokenizer, trains a step and checkpoints; stderr carries none of the
// drivers' harmless noise; running the same command again is refused, naming --resume
// and --overwrite, before the GPU starts; a misspelled flag is named; `eval` of a run
// scaled down for the software GPU says why it will score zero; and the Deno task
// trains, recognising the software renderer behind Deno's own WebGPU.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { scaledRunNote } from '../src/cli/eval.ts';
import { SCALE_RECORD_FILE } from '../src/config/default_run.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
/** Packages the trainer must start without. */
const ABSENT = ['onnxruntime-node', 'onnxruntime-web', 'onnxruntime-common', 'sharp', '@img', '@huggingface/transformers'];
const slow = { timeout: 600_000 };

/** The project's sources in a temporary directory, with a node_modules of links to every installed package but ABSENT. */
function projectWithoutNativePackages(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-first-run-'));
  for (const sub of ['src', 'shaders', 'envs']) fs.cpSync(path.join(ROOT, sub), path.join(dir, sub), { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  fs.symlinkSync(path.join(ROOT, 'models'), path.join(dir, 'models'));
  const link = (from: string, to: string) => {
    for (const name of fs.readdirSync(from)) {
      const pkg = path.relative(path.join(ROOT, 'node_modules'), path.join(from, name));
      if (name === '.bin' || ABSENT.includes(pkg)) continue;
      if (name.startsWith('@')) {
        fs.mkdirSync(path.join(to, name));
        link(path.join(from, name), path.join(to, name));
      } else fs.symlinkSync(path.join(from, name), path.join(to, name));
    }
  };
  fs.mkdirSync(path.join(dir, 'node_modules'));
  link(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

/** The CLI under this runtime in `cwd`, with the environment of a fresh shell: no EGL_PLATFORM, no XDG_RUNTIME_DIR. */
function cli(cwd: string, args: string[]) {
  const env = { ...process.env };
  delete env.EGL_PLATFORM;
  delete env.XDG_RUNTIME_DIR;
  const r = spawnSync(process.execPath, [path.join(cwd, 'src', 'cli', 'main.ts'), ...args], { cwd, env, encoding: 'utf8', timeout: 540_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const NOISE = /XDG_RUNTIME_DIR|artificially reduced|Couldn't load Vulkan|ArrayDynamicIndexing|node-webgpu/;

describe('first run', () => {
  const dir = projectWithoutNativePackages();
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const small = ['iterations=1', 'rollout.maxTurns=1', 'rollout.maxResponseTokens=8', 'algorithm.klCoef=0', 'output.tensorboard=false', 'output.progress=plain'];

  test('train runs the bundled model without the native packages, quietly; again it is refused before the GPU starts', slow, () => {
    for (const pkg of ABSENT) assert.ok(!fs.existsSync(path.join(dir, 'node_modules', pkg)), `${pkg} is hidden`);
    const first = cli(dir, ['train', ...small]);
    assert.equal(first.code, 0, `train failed:\n${first.out}\n${first.err}`);
    assert.match(first.out, /training grpo on household from models\/household-tiny/);
    assert.match(first.out, /iter 1\/1 \| success/);
    assert.match(first.out, /update 1 \d+\/\d+ [\d.]+s/, 'the update phase shows progress');
    assert.doesNotMatch(first.err, NOISE, first.err);
    const run = path.join(dir, 'runs', 'household-grpo-s0');
    assert.ok(fs.existsSync(path.join(run, 'checkpoints', 'ckpt-1', 'checkpoint.json')));
    if (/^software GPU: scaled the run down/m.test(first.out)) {
      const record = JSON.parse(fs.readFileSync(path.join(run, SCALE_RECORD_FILE), 'utf8'));
      assert.ok(record.changes.includes('validation.tasks 128 -> 1'), record.changes.join(', '));
    }

    const again = cli(dir, ['train', ...small]);
    assert.equal(again.code, 1);
    assert.match(again.err, /runs\/household-grpo-s0 already holds a run \(checkpoints up to ckpt-1\): pass --resume to continue it, --overwrite to replace it/);
    assert.doesNotMatch(again.out, /GPU:/, 'refused before the GPU starts');
  });

  test('eval of the scaled-down run says why it scores zero', slow, () => {
    const run = path.join('runs', 'household-grpo-s0');
    if (!fs.existsSync(path.join(dir, run, SCALE_RECORD_FILE))) return; // ran on a real GPU: nothing was scaled
    const r = cli(dir, ['eval', run, '--seeds', '1', '--max-response-tokens', '8']);
    assert.equal(r.code, 0, `eval failed:\n${r.out}\n${r.err}`);
    assert.match(r.out, /note: runs\/household-grpo-s0 was scaled down for the software GPU .* evaluation takes the run's validation\.tasks 1: .*expect success near 0\. Pass --tasks 128 /);
    assert.match(r.out, /^all /m);
  });

  test('a misspelled flag is named, with the one meant', () => {
    const r = cli(dir, ['train', '--iteratons', '3']);
    assert.equal(r.code, 1);
    assert.equal(r.err.trim(), 'error: train: unknown option --iteratons; did you mean --iterations? (`train --help` lists the options)');
  });

  test('the Deno task trains under Deno, scaled down on a software renderer', slow, () => {
    const deno = path.join(ROOT, 'node_modules', '.bin', 'deno');
    if (!fs.existsSync(deno)) return;
    const out = path.join(dir, 'runs-deno');
    const env = { ...process.env };
    delete env.EGL_PLATFORM;
    delete env.XDG_RUNTIME_DIR;
    const r = spawnSync(deno, ['task', 'train', ...small, `output.dir=${out}`], { cwd: ROOT, env, encoding: 'utf8', timeout: 540_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /\(deno\)/);
    assert.match(r.stdout, /iter 1\/1 \| success/);
    if (/^GPU: .*(llvmpipe|lavapipe)/m.test(r.stdout)) assert.match(r.stdout, /^software GPU: scaled the run down/m);
    assert.doesNotMatch(r.stderr, NOISE, r.stderr);
  });
});

describe('the note on a scaled-down run', () => {
  const record = { adapter: 'llvmpipe', changes: ['iterations 150 -> 2', 'rollout.maxTurns 30 -> 2', 'rollout.maxResponseTokens 64 -> 40', 'validation.tasks 128 -> 1'] };

  test('names the inherited settings and the flags that restore them, leaving out what the command line sets', () => {
    const note = scaledRunNote('runs/x', record, new Set());
    assert.equal(note, "note: runs/x was scaled down for the software GPU (llvmpipe) when it trained, and evaluation takes the run's rollout.maxTurns 2, " +
      'rollout.maxResponseTokens 40, validation.tasks 1: episodes that short rarely finish a task, so expect success near 0. ' +
      'Pass --max-turns 30 --max-response-tokens 64 --tasks 128 to evaluate with the configured settings.');
    assert.match(scaledRunNote('runs/x', record, new Set(['--max-turns', '--tasks']))!, /takes the run's rollout\.maxResponseTokens 40: .* Pass --max-response-tokens 64 to/);
    assert.equal(scaledRunNote('runs/x', record, new Set(['--max-turns', '--tasks', '--max-response-tokens'])), null);
    assert.equal(scaledRunNote('runs/x', { adapter: 'llvmpipe', changes: ['iterations 150 -> 2'] }, new Set()), null);
  });
});
