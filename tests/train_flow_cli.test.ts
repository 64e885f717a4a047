// The README's smoke flow through the CLI: `train examples/smoke.yaml --method NAME`
// for one method after another, each in a run of its own. A run's start names its
// configuration in a line (the whole of it goes to config.json), every iteration's line
// says how long is left, the run ends with a summary (iterations, time, final and peak
// validation, the report), and `--resume` of a finished run says there is nothing to
// do before the GPU starts. SFT prints one line per step it reports, not two. Inference
// servers are checked before the run directory is made.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { cliEnv, MAIN, ROOT } from './support/cli_process.ts';

const slow = { timeout: 600_000 };

const cli = (args: string[]) => {
  const r = spawnSync(process.execPath, [MAIN, ...args], { cwd: ROOT, env: cliEnv(), encoding: 'utf8', timeout: 540_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('train examples/smoke.yaml, one method after another', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-train-flow-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const smoke = (...words: string[]) => cli(['train', 'examples/smoke.yaml', `output.dir=${dir}`, ...words]);

  test('each method trains in a run of its own, saying how long is left, and ends with a summary; --resume of it has nothing to do', slow, () => {
    const grpo = smoke('--method', 'grpo', 'iterations=2');
    assert.equal(grpo.code, 0, grpo.err);
    const run = path.join(dir, 'household-grpo-s0');
    assert.match(grpo.out, new RegExp(`^configuration: examples/smoke\\.yaml with output\\.dir=\\S+ iterations=2 method=grpo; every setting is written to ${run}/config\\.json$`, 'm'));
    assert.doesNotMatch(grpo.out, /^(rollout|optim|algorithm):$/m, 'the configuration is not printed whole');
    assert.ok(fs.existsSync(path.join(run, 'config.json')));
    assert.match(grpo.out, /^iter 1\/2 \| .* \| \d+\.\ds \(rollout .*\) \| about \d[\w ]* left$/m);
    assert.match(grpo.out, /^iter 2\/2 \| .* \| \d+\.\ds \(rollout .*\)$/m);
    assert.match(grpo.out, new RegExp(`^${run}: finished all 2 iterations\\n  time {8}\\d[\\w ]* for iterations 1-2 in this command\\n` +
      `  validation  success \\d\\.\\d{3} at iteration 2 \\(final\\), peak \\d\\.\\d{3} at iteration [12]\\n  report {6}${run}/report\\.html$`, 'm'));

    const sdar = smoke('--method', 'sdar');
    assert.equal(sdar.code, 0, sdar.err);
    assert.match(sdar.out, /household-sdar-s0: finished all 1 iterations/);

    const again = smoke('--method', 'grpo', 'iterations=2', '--resume');
    assert.equal(again.code, 0, again.err);
    assert.match(again.out, new RegExp(`^${run}: nothing to do, the run already completed its 2 iterations; to train further, raise iterations \\(iterations=N\\) and pass --resume\\n` +
      `  time {8}\\d[\\w ]* in all \\(2 iterations timed\\)\\n  validation  success \\d\\.\\d{3} at iteration 2 \\(final\\)`, 'm'));
    assert.doesNotMatch(again.out, /^GPU:/m, 'nothing to do is found before the GPU starts');
  });

  test('sft prints one line per step it reports, with the time left', slow, () => {
    const sft = smoke('--method', 'sft');
    assert.equal(sft.code, 0, sft.err);
    const steps = sft.out.split('\n').filter((l) => l.startsWith('sft step '));
    assert.ok(steps.length >= 2, sft.out);
    assert.doesNotMatch(sft.out, /^sft \d+\/\d+ /m, 'no progress line besides the step lines');
    assert.match(steps[0], /\| about \d[\w ]* left$/);
    assert.match(sft.out, /household-sft-s0: finished all \d+ steps\n {2}time {8}\d[\w ]* for steps 1-\d+ in this command\n {2}validation {2}success \d\.\d{3} at step \d+ \(final\)/);
  });

  test('inference servers are checked before the run directory is made', slow, async () => {
    const port = await closedPort();
    const r = smoke('--method', 'grpo', 'output.runName=no-server', 'rollout.engine=http', `rollout.url=http://127.0.0.1:${port}`, 'rollout.serverWaitSeconds=1');
    assert.equal(r.code, 1, r.out);
    assert.match(r.err, new RegExp(`http://127\\.0\\.0\\.1:${port}`));
    assert.ok(!fs.existsSync(path.join(dir, 'no-server')), 'no run directory, not even the software GPU\'s scale record');
  });

  test('train --help names every method', () => {
    const help = cli(['train', '--help']);
    assert.equal(help.code, 0);
    assert.doesNotMatch(help.out, /Train an agent \(GRPO\)/);
    assert.match(help.out, /any method \(grpo, skill_grpo, sdar, .*sft\b/s);
  });
});
