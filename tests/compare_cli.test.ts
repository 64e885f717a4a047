// `compare` through the CLI: each run's iterations are reported as they come with the
// time left, the run's and the comparison's; the table counts iterations as integers and
// says when the runs were scaled down for a software GPU. Run again without --resume it
// refuses before anything starts and keeps every earlier log; with --resume it appends
// to them. A run that fails is reported with its reason on the terminal, and the
// command exits non-zero.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { cliEnv, MAIN, ROOT } from './support/cli_process.ts';

const slow = { timeout: 600_000 };

const compare = (...args: string[]) => {
  const r = spawnSync(process.execPath, [MAIN, 'compare', ...args], { cwd: ROOT, env: cliEnv(), encoding: 'utf8', timeout: 540_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

describe('compare through the CLI', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-compare-cli-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test('progress with the time left, an integer iteration count, a note on scaled-down runs; run again, the logs are kept', slow, () => {
    const out = path.join(root, 'cmp');
    const first = compare('examples/smoke.yaml', 'iterations=2', '--methods', 'grpo', '--seeds', '2', '--out', out);
    assert.equal(first.code, 0, first.err + first.out);
    assert.match(first.out, /^grpo-s0: iter 1\/2, about \d[\w ]* left \| compare: 0 of 2 runs done, about \d[\w ]* left$/m);
    assert.match(first.out, /^done grpo-s0 \(\d+ s, 2 of 2 iterations\) \| compare: 1 of 2 runs done, about \d[\w ]* left$/m);
    assert.match(first.out, /^done grpo-s1 \(\d+ s, 2 of 2 iterations\) \| compare: 2 of 2 runs done$/m);
    assert.match(first.out, /^\| grpo \| 0,1 \| 2 \| /m);
    const log = path.join(out, 'grpo-s0', 'train.log');
    const finished = fs.readFileSync(log, 'utf8');
    if (/^software GPU: scaled the run down/m.test(finished)) {
      assert.match(first.out, /^Scaled down for the software GPU \(.*\), so not the configured runs: grpo-s0, grpo-s1 \(.*rollout\.tasksPerIteration 2 -> 1.*\); compare with --full-size runs them as configured\.$/m);
    }

    const again = compare('examples/smoke.yaml', 'iterations=2', '--methods', 'grpo', '--seeds', '2', '--out', out);
    assert.equal(again.code, 1);
    assert.match(again.err, /already holds runs grpo-s0 \(checkpoints up to ckpt-2\), grpo-s1 \(checkpoints up to ckpt-2\): pass --resume to continue them, --overwrite to replace them, or --out another directory/);
    assert.doesNotMatch(again.out, /^start /m, 'refused before any run starts');
    assert.equal(fs.readFileSync(log, 'utf8'), finished, 'the finished run\'s log is kept');

    const resumed = compare('examples/smoke.yaml', 'iterations=2', '--methods', 'grpo', '--seeds', '1', '--out', out, '--resume');
    assert.equal(resumed.code, 0, resumed.err + resumed.out);
    const both = fs.readFileSync(log, 'utf8');
    assert.ok(both.startsWith(finished), 'the earlier invocation\'s log comes first, whole');
    assert.match(both.slice(finished.length), /^\n=== \S+ train examples\/smoke\.yaml .* --resume .*\n[^]*nothing to do/);
  });

  test('a run that fails: its reason on the terminal, and the command exits non-zero', slow, () => {
    const model = path.join(root, 'damaged');
    fs.cpSync(path.join(ROOT, 'models', 'household-micro'), model, { recursive: true });
    const weights = path.join(model, 'model.safetensors');
    fs.truncateSync(weights, fs.statSync(weights).size - 64);
    const out = path.join(root, 'failing');
    const r = compare('examples/smoke.yaml', `model.path=${model}`, '--methods', 'grpo', '--seeds', '1', '--out', out);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /^FAILED grpo-s0 \(exit 1, \d+ s\): error: .*model\.safetensors.* \(log: .*failing\/grpo-s0\/train\.log\) \| compare: 1 of 1 runs done$/m);
    assert.match(r.err, /^error: 1 of 1 runs failed: grpo-s0 \(error: .*model\.safetensors.*\)$/m);
  });
});
