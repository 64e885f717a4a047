// How a run starts in its directory (src/run/run_start.ts): a run without a checkpoint
// is started over by the same command, with or without --resume; a checkpointed one is
// refused without --resume or --overwrite; --resume of nothing names the command that works.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { planRunStart } from '../src/run/run_start.ts';

describe('planRunStart', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-run-start-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test('an empty or absent directory is a new run; --resume of it names the command that works', () => {
    assert.deepEqual(planRunStart(path.join(root, 'none'), {}), { kind: 'new' });
    assert.throws(() => planRunStart(path.join(root, 'none'), { resume: true }), /--resume: there is no run in .*none to continue; run the command without --resume to start it/);
  });

  test('a run stopped before its first checkpoint starts over, with or without --resume', () => {
    const dir = path.join(root, 'early');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'metrics.jsonl'), '{"iteration":0}\n');
    assert.deepEqual(planRunStart(dir, {}), { kind: 'restart', note: `${dir} holds a run that stopped before its first checkpoint; starting it over` });
    const resumed = planRunStart(dir, { resume: true });
    assert.equal(resumed.kind, 'restart');
    assert.match((resumed as { note: string }).note, /--resume: .*early stopped before its first checkpoint .*; starting it from the beginning/);
  });

  test('a checkpointed run is refused without --resume or --overwrite', () => {
    const dir = path.join(root, 'saved');
    fs.mkdirSync(path.join(dir, 'checkpoints', 'ckpt-2'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'checkpoints', 'ckpt-2', 'checkpoint.json'), '{}');
    fs.writeFileSync(path.join(dir, 'metrics.jsonl'), '{"iteration":2}\n');
    assert.throws(() => planRunStart(dir, {}), /saved already holds a run \(checkpoints up to ckpt-2\): pass --resume to continue it, --overwrite to replace it/);
    assert.deepEqual(planRunStart(dir, { overwrite: true }), { kind: 'restart', note: null });
    assert.deepEqual(planRunStart(dir, { resume: true }), { kind: 'resume', checkpoint: path.join(dir, 'checkpoints', 'ckpt-2') });
  });
});
