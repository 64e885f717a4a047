// Training against this project's own `serve`, as the README shows it: the server
// started, then `train examples/smoke.yaml rollout.engine=http rollout.url=...`. A
// server started without --allowed-root reads no paths from requests, so it cannot load
// the run's weights: the run stops before its first rollout, saying what to pass. With
// --allowed-root over the folder that holds the run, the run trains and every update
// reaches the server.

import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { readMetrics } from '../src/report/metrics.ts';
import { cliEnv, runCli, startServe } from './support/cli_process.ts';

const MODEL = path.join('models', 'household-micro');
const slow = { timeout: 600_000 };
const out = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-serve-train-')));
const env = { ...cliEnv(), WGT_SERVER_LOCKS: path.join(out, 'locks'), VLLM_API_KEY: '', OPENAI_API_KEY: '' };
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(out, { recursive: true, force: true });
});

async function serve(...flags: string[]): Promise<string> {
  const { child, url } = startServe([MODEL, '--port', '0', ...flags], env);
  children.push(child);
  return url;
}

const train = (name: string, url: string) =>
  runCli(['train', 'examples/smoke.yaml', '--full-size', `output.dir=${out}`, `output.runName=${name}`, 'rollout.engine=http', `rollout.url=${url}`, 'validation.every=0', 'output.progress=none'], env);

describe('train against serve, through the CLI', () => {
  test('a serve without --allowed-root stops the run before its first rollout, naming the flag; with it the run trains', slow, async () => {
    const closed = await serve();
    const refused = await train('no-root', closed);
    assert.equal(refused.code, 1, refused.out);
    assert.match(refused.out, /rollout server http:\/\/127\.0\.0\.1:\d+ cannot load the run's weights \(.*no-root[/\\]sync[/\\]policy-step-0\): .*answered 403: weights_path refused: the server was started without --allowed-root/);
    assert.match(refused.out, new RegExp(`start it with --allowed-root naming a folder that holds ${path.join(out, 'no-root', 'sync').replace(/[.\\/]/g, '\\$&')}`));
    assert.ok(!fs.existsSync(path.join(out, 'no-root', 'rollouts', 'iter-1.jsonl')), 'no rollout');

    const open = await serve('--allowed-root', out);
    const r = await train('with-root', open);
    assert.equal(r.code, 0, r.out);
    const [row] = readMetrics(path.join(out, 'with-root', 'metrics.jsonl'));
    assert.equal(row.iteration, 1);
    assert.ok((row['time/weight_sync'] as number) > 0, 'the update was pushed to the server');
  });
});
