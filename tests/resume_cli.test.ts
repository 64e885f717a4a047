// --resume through the CLI: a changed configuration is refused naming the settings that
// differ; a damaged newest checkpoint is passed over for the newest intact one, saying so;
// `--resume ckpt-N` continues from the checkpoint named.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { readMetrics } from '../src/report/metrics.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const slow = { timeout: 600_000 };

describe('--resume through the CLI', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-resume-cli-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const run = path.join(dir, 'r');
  const ckpt = (n: number) => path.join(run, 'checkpoints', `ckpt-${n}`);
  const train = (...extra: string[]) => {
    const r = spawnSync(process.execPath, ['src/cli/main.ts', 'train', 'examples/smoke.yaml', `output.dir=${dir}`, 'output.runName=r', 'rollout.tasksPerIteration=1',
      'rollout.maxTurns=1', 'validation.every=0', 'checkpoint.keepLast=0', ...extra], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };

  test('a changed setting is named; a damaged newest checkpoint falls back; a named one is taken', slow, () => {
    const first = train('iterations=3');
    assert.equal(first.code, 0, first.err);
    assert.ok([1, 2, 3].every((n) => fs.existsSync(path.join(ckpt(n), 'checkpoint.json'))));

    const changed = train('iterations=4', 'optim.lr=2e-4', 'rollout.groupSize=3', '--resume');
    assert.equal(changed.code, 1);
    assert.match(changed.err, /ckpt-3: the checkpoint was made with another configuration; these settings differ from the checkpoint's: optim\.lr: 0\.000001 -> 0\.0002, rollout\.groupSize: 2 -> 3\. Only iterations, checkpoint\.\*, output\.\*, gpu\.\* may change on resume/);
    assert.doesNotMatch(changed.err, /hash/);

    // Truncated as a crash or a full disk would leave it.
    const optimizer = path.join(ckpt(3), 'optimizer.safetensors');
    fs.truncateSync(optimizer, fs.statSync(optimizer).size - 8);
    const fallback = train('iterations=4', '--resume');
    assert.equal(fallback.code, 0, fallback.err);
    assert.match(fallback.out, /ckpt-3 is damaged \(.*optimizer\.safetensors: \d+ bytes, but checkpoint\.json says \d+ \(truncated or modified\)\); resuming from ckpt-2, the newest intact checkpoint/);
    assert.match(fallback.out, /resuming .*r after iteration 2 \(.*ckpt-2\)/);
    assert.deepEqual(readMetrics(path.join(run, 'metrics.jsonl')).map((m) => m.iteration), [1, 2, 3, 4]);

    const named = train('iterations=4', '--resume', 'ckpt-1');
    assert.equal(named.code, 0, named.err);
    assert.match(named.out, /resuming .*r after iteration 1 \(.*ckpt-1\)/);
    assert.deepEqual(readMetrics(path.join(run, 'metrics.jsonl')).map((m) => m.iteration), [1, 2, 3, 4]);

    const missing = train('iterations=4', '--resume=ckpt-9');
    assert.equal(missing.code, 1);
    assert.match(missing.err, /--resume ckpt-9: no complete checkpoint .*ckpt-9; .*checkpoints holds ckpt-1, ckpt-2, ckpt-3, ckpt-4/);
    const stray = train('iterations=4', 'ckpt-2');
    assert.match(stray.err, /ckpt-2: a checkpoint name goes after --resume/);
  });
});
