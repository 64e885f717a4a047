// Ctrl-C through the CLI, as a terminal delivers it: to the whole foreground process
// group. Under `bun run train` (the README's command) the wrapper forwards its own copy,
// so the trainer sees two signals at once; that is still one Ctrl-C, which finishes the
// iteration and saves a checkpoint. A second Ctrl-C a moment later stops at once. A run
// stopped before its first checkpoint, by Ctrl-C or by a checkpoint that could not be
// written (a full disk), starts over when the same command is given again.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { SAME_INTERRUPT_MS } from '../src/run/run.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const slow = { timeout: 600_000 };

/** A process started in its own group, its output gathered, and a way to wait for a line. */
function start(args: string[], cwd = ROOT) {
  const child = spawn(process.execPath, args, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (w.re.test(out)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout!.on('data', (d) => {
    out += d;
    check();
  });
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    get out() {
      return out;
    },
    get err() {
      return err;
    },
    exited,
    waitFor(re: RegExp): Promise<void> {
      return new Promise((resolve, reject) => {
        waiters.push({ re, resolve });
        check();
        exited.then(() => reject(new Error(`exited before ${re}:\n${out}\n${err}`)));
      });
    },
  };
}

/** A Ctrl-C from the terminal: SIGINT to every process of the group. */
const ctrlC = (child: ChildProcess) => process.kill(-child.pid!, 'SIGINT');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Ctrl-C through the CLI', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-interrupt-cli-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // Iterations long enough on the software GPU that the signals arrive inside the first.
  const words = (name: string) => [
    'examples/smoke.yaml', `output.dir=${dir}`, `output.runName=${name}`, 'iterations=20', 'rollout.tasksPerIteration=6',
    'rollout.maxTurns=3', 'checkpoint.every=100', 'validation.every=100',
  ];

  test('under `bun run train` one Ctrl-C (delivered twice) finishes the iteration and checkpoints it', slow, async () => {
    const p = start(['run', 'train', ...words('wrapped')]);
    await p.waitFor(/^training grpo/m);
    ctrlC(p.child);
    const code = await p.exited;
    assert.equal(code, 0, `${p.out}\n${p.err}`);
    assert.equal(p.out.match(/interrupted: finishing this iteration/g)?.length, 1, p.out);
    assert.doesNotMatch(p.out, /^stopped:/m);
    assert.match(p.out, /checkpoint .*wrapped\/checkpoints\/ckpt-1$/m);
    assert.match(p.out, /stopped after iteration 1 of 20; continue with the same command and --resume/);
  });

  test('the wrapper\'s copy is the same Ctrl-C; a second one a moment later stops at once', slow, async () => {
    const p = start(['src/cli/main.ts', 'train', ...words('twice')]);
    await p.waitFor(/^training grpo/m);
    // The terminal's signal, handled; then the wrapper's copy of it, as `bun run` passes it on.
    ctrlC(p.child);
    await p.waitFor(/interrupted: finishing this iteration/);
    ctrlC(p.child);
    await sleep(SAME_INTERRUPT_MS + 500);
    assert.doesNotMatch(p.out, /^stopped/m, 'the copy did not stop the run');
    ctrlC(p.child);
    const code = await p.exited;
    assert.equal(code, 130, `${p.out}\n${p.err}`);
    assert.match(p.out, /^stopped: no checkpoint has been saved yet; run the same command again to start it over$/m);
    assert.doesNotMatch(p.out, /checkpoint .*ckpt-1$/m);

    const again = start(['src/cli/main.ts', 'train', ...words('twice')]);
    await again.waitFor(/^training grpo/m);
    ctrlC(again.child);
    assert.equal(await again.exited, 0, `${again.out}\n${again.err}`);
    assert.match(again.out, /twice holds a run that stopped before its first checkpoint; starting it over/);
    assert.match(again.out, /checkpoint .*twice\/checkpoints\/ckpt-1$/m);
  });

  test('a checkpoint that cannot be written stops the run; the same command starts it over once that is fixed', slow, async () => {
    const args = ['src/cli/main.ts', 'train', ...words('unwritable'), 'iterations=1', 'rollout.tasksPerIteration=1'];
    // The `latest` pointer cannot replace a directory, as it could not be written on a full disk.
    const blocked = path.join(dir, 'unwritable', 'checkpoints', 'latest');
    fs.mkdirSync(path.join(blocked, 'in-the-way'), { recursive: true });
    const failed = start(args);
    assert.equal(await failed.exited, 1, `${failed.out}\n${failed.err}`);
    assert.match(failed.err, /saving checkpoint .*ckpt-1 failed: .*; there is no earlier checkpoint/);
    assert.match(failed.out, /stopped by an error: no checkpoint was saved; once it is fixed, run the same command again to start it over/);
    fs.rmSync(blocked, { recursive: true });
    const again = start(args);
    assert.equal(await again.exited, 0, `${again.out}\n${again.err}`);
    assert.match(again.out, /unwritable holds a run that stopped before its first checkpoint; starting it over/);
    assert.match(again.out, /checkpoint .*unwritable\/checkpoints\/ckpt-1$/m);
  });
});
