// One writer per run directory (src/run/run_lock.ts): the lock names its owner; a second
// writer is refused naming the first, through the CLI before the GPU starts; a lock
// whose process is gone is taken over, saying so; the lock goes when its process exits.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { RUN_LOCK_FILE, RunLock, RunLockedError } from '../src/run/run_lock.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

describe('the run lock', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-run-lock-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test('records its owner, refuses a second writer naming the first, and goes on release', () => {
    const dir = path.join(root, 'a');
    const lock = RunLock.acquire(dir);
    const owner = JSON.parse(fs.readFileSync(path.join(dir, RUN_LOCK_FILE), 'utf8'));
    assert.equal(owner.pid, process.pid);
    assert.equal(owner.host, os.hostname());
    assert.throws(() => RunLock.acquire(dir), (e: Error) => e instanceof RunLockedError && /a is in use by this process \(another run of the same name\) since .*: one run writes a run directory at a time/.test(e.message));
    lock.release();
    assert.ok(!fs.existsSync(path.join(dir, RUN_LOCK_FILE)));
    RunLock.acquire(dir).release();
  });

  test('a lock of a process that is gone is taken over, saying so; one from another host is not', () => {
    const dir = path.join(root, 'b');
    fs.mkdirSync(dir);
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    fs.writeFileSync(path.join(dir, RUN_LOCK_FILE), JSON.stringify({ pid: dead, host: os.hostname(), started: '2026-01-01T00:00:00.000Z', command: 'train old' }));
    const lines: string[] = [];
    RunLock.acquire(dir, (l) => lines.push(l)).release();
    assert.match(lines.join('\n'), new RegExp(`taking over a stale lock \\(its process ${dead} is gone; it was taken 2026-01-01T00:00:00.000Z by train old\\)`));

    fs.writeFileSync(path.join(dir, RUN_LOCK_FILE), JSON.stringify({ pid: dead, host: 'elsewhere', started: '2026-01-01T00:00:00.000Z', command: 'train far' }));
    assert.throws(() => RunLock.acquire(dir), new RegExp(`in use by pid ${dead} on elsewhere since 2026-01-01T00:00:00.000Z \\(train far\\).*delete .*run\\.lock only if no run is writing there`));
  });

  test('the lock goes when its process exits at once (a second Ctrl-C)', () => {
    const dir = path.join(root, 'c');
    const script = `import { RunLock } from ${JSON.stringify(path.join(ROOT, 'src', 'run', 'run_lock.ts'))}; RunLock.acquire(${JSON.stringify(dir)}); process.exit(130);`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    assert.equal(r.status, 130, r.stderr);
    assert.ok(fs.existsSync(dir) && !fs.existsSync(path.join(dir, RUN_LOCK_FILE)));
  });

  test('a second `train` of the same run is refused before the GPU starts, naming the first', { timeout: 600_000 }, async () => {
    const words = ['examples/smoke.yaml', `output.dir=${root}`, 'output.runName=busy', 'iterations=20', 'checkpoint.every=100', 'validation.every=100'];
    const first = spawn(process.execPath, ['src/cli/main.ts', 'train', ...words], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      first.stdout!.on('data', (d) => {
        out += d;
        if (/^training grpo/m.test(out)) resolve();
      });
      first.on('exit', () => reject(new Error(`the first run ended:\n${out}`)));
    });
    const exited = new Promise((resolve) => first.on('exit', resolve));
    try {
      for (const extra of [[], ['--overwrite'], ['--resume']]) {
        const second = spawnSync(process.execPath, ['src/cli/main.ts', 'train', ...words, ...extra], { cwd: ROOT, encoding: 'utf8' });
        assert.equal(second.status, 1, second.stdout + second.stderr);
        assert.match(second.stderr, new RegExp(`busy is in use by pid ${first.pid} on ${os.hostname()} since \\S+ \\(.*main\\.ts train examples/smoke\\.yaml .*\\): one run writes a run directory at a time`));
        assert.doesNotMatch(second.stdout, /GPU:/, 'refused before the GPU starts');
      }
    } finally {
      first.kill('SIGKILL');
      await exited;
    }
  });
});
