// `train` and `eval` through the CLI against a server that answers as AgentGym's
// ALFWorld server does (envs/agentgym/), and against servers that fail: every episode
// starts on a game the server holds, validation and evaluation play its test games,
// the server holds no more environments than the rollout's concurrency; a server
// whose every /reset fails, or too many of them, stops the run with a non-zero exit,
// the server's error and no checkpoint; an unreachable server or one of another kind
// stops it before the first rollout.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { serveAlfworld } from '../envs/agentgym/index.ts';
import { serveEnvironment } from '../envs/server.ts';
import { ShopEnvironment } from '../envs/shop/index.ts';
import { loadConfig } from '../src/config/config.ts';
import type { EvalReport } from '../src/eval/evaluate.ts';
import { drawTrainingTasks } from '../src/eval/tasks.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { Rng } from '../src/util/random.ts';
import { runCli } from './support/cli_process.ts';

const slow = { timeout: 600_000 };
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-agentgym-cli-'));
after(() => fs.rmSync(out, { recursive: true, force: true }));

const cli = runCli;

/** The smoke run (examples/smoke.yaml: two tasks of two runs, three turns) at full size, in its own directory. */
const smoke = (name: string, ...overrides: string[]) => ['train', 'examples/smoke.yaml', '--full-size', `output.dir=${out}`, `output.runName=${name}`, ...overrides];

const checkpoints = (run: string) => (fs.existsSync(path.join(out, run, 'checkpoints')) ? fs.readdirSync(path.join(out, run, 'checkpoints')).filter((n) => n.startsWith('ckpt-')) : []);

describe('train and eval against an AgentGym ALFWorld server', () => {
  test('training starts every episode on a training game, validates on the test games, holds at most the concurrency; eval of the run plays its test games', slow, async () => {
    const server = await serveAlfworld();
    try {
      const r = await cli(smoke('ok', 'env.agentgym=true', `env.url=${server.url}`, 'rollout.concurrency=3', 'env.tasks.test=2420-2422'));
      assert.equal(r.code, 0, r.out);
      const iter = readTrajectoryLog(path.join(out, 'ok', 'rollouts', 'iter-1.jsonl'));
      assert.equal(iter.length, 4);
      for (const t of iter) {
        assert.equal(t.error, undefined, t.error);
        assert.ok(t.split === 'train' && t.seed >= 0 && t.seed < 2420 && t.turns.length >= 1, JSON.stringify([t.split, t.seed]));
      }
      assert.deepEqual(readTrajectoryLog(path.join(out, 'ok', 'rollouts', 'val-1.jsonl')).map((t) => [t.split, t.seed, t.error]), [['validation', 2420, undefined], ['validation', 2421, undefined]]);
      assert.ok(server.environments() <= 3, `the server holds ${server.environments()} environments`);
      assert.deepEqual(checkpoints('ok'), ['ckpt-1']);
      const held = server.environments();

      // eval of the run: its server, AgentGym's test split by default, here the run's env.tasks.test.
      const report = path.join(out, 'ok-eval.json');
      const e = await cli(['eval', path.join(out, 'ok'), '--seeds', '1', '--out', report, '--progress', 'none']);
      assert.equal(e.code, 0, e.out);
      assert.match(e.out, /on household \(AgentGym server http:\/\/127\.0\.0\.1:\d+\) test: 3 tasks \(tasks 2420\.\.2422 of the server's test set\)/);
      const saved = JSON.parse(fs.readFileSync(report, 'utf8')) as EvalReport;
      assert.deepEqual([saved.split, saved.agentgym, saved.envUrl, saved.panelSeed], ['test', true, server.url, null]);
      assert.deepEqual(saved.episodes.map((x) => x.taskId), ['test:2420', 'test:2421', 'test:2422']);
      // A new process makes its own environments (AgentGym's server keeps the run's): one per episode live at once.
      assert.ok(server.environments() - held <= 3, `eval made ${server.environments() - held} environments`);
    } finally {
      await server.close();
    }
  });

  test('eval of a model directory names the server: --env-url with --agentgym plays the test games; --panel-seed has no meaning there', slow, async () => {
    const server = await serveAlfworld();
    try {
      const report = path.join(out, 'micro-eval.json');
      const e = await cli(['eval', 'models/household-micro', '--env-url', server.url, '--agentgym', '--tasks', '2', '--seeds', '1', '--max-turns', '2', '--out', report, '--progress', 'none']);
      assert.equal(e.code, 0, e.out);
      const saved = JSON.parse(fs.readFileSync(report, 'utf8')) as EvalReport;
      assert.deepEqual(saved.episodes.map((x) => x.taskId), ['test:2420', 'test:2421']);
      const bad = await cli(['eval', 'models/household-micro', '--env-url', server.url, '--agentgym', '--panel-seed', '5']);
      assert.equal(bad.code, 1);
      assert.match(bad.out, /error: panelSeed: an AgentGym server's tasks are its own indices/);
    } finally {
      await server.close();
    }
  });

  test('a server whose every /reset fails stops train and eval with its error, a non-zero exit and no checkpoint', slow, async () => {
    // A server without its games (no mappings): "list index out of range" for every index.
    const server = await serveAlfworld({ trainGames: 0, testGames: 0 });
    try {
      const r = await cli(smoke('empty', 'env.agentgym=true', `env.url=${server.url}`));
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /error: iteration 1: every one of its 4 episodes failed in the environment; the server's first error: starting the episode \(split train, seed \d+\): AgentGym alfworld server http:\/\/127\.0\.0\.1:\d+: POST \/reset -> 200: list index out of range/);
      assert.deepEqual(checkpoints('empty'), []);
      assert.deepEqual(readMetrics(path.join(out, 'empty', 'metrics.jsonl')), []);
      const e = await cli(['eval', 'models/household-micro', '--env-url', server.url, '--agentgym', '--tasks', '2', '--seeds', '1']);
      assert.equal(e.code, 1, e.out);
      assert.match(e.out, /error: evaluation: every one of its 2 episodes failed in the environment; the server's first error: .*list index out of range/);
    } finally {
      await server.close();
    }
    // Training games but no test games: the validation before the first update fails whole.
    const noTests = await serveAlfworld({ testGames: 0 });
    try {
      const r = await cli(smoke('no-tests', 'env.agentgym=true', `env.url=${noTests.url}`, 'validation.atStart=true'));
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /error: validation at iteration 0: every one of its 2 episodes failed in the environment; the server's first error: starting the episode \(split validation, seed 2420\): .*list index out of range/);
      assert.deepEqual(checkpoints('no-tests'), []);
    } finally {
      await noTests.close();
    }
  });

  test('some failed episodes show on the console line; past env.maxFailedShare they stop the run', slow, async () => {
    // Games 0-99 and 100 test games: training index 500 is past the server's list.
    const server = await serveAlfworld({ trainGames: 100, testGames: 100 });
    const settings = ['env.agentgym=true', `env.url=${server.url}`, 'env.tasks.train=[5, 500]', 'env.tasks.validation=[150, 160]', 'rollout.tasksPerIteration=4', 'rollout.maxTurns=1'];
    const drawn = drawTrainingTasks(loadConfig('examples/smoke.yaml', settings), Rng.seeded(0, 'tasks'), 4);
    const failed = drawn.filter((t) => t.seed === 500).length * 2;
    assert.ok(failed > 0 && failed < 8, `seed 0 draws both games (${drawn.map((t) => t.seed)})`);
    try {
      const tolerated = await cli(smoke('some', ...settings, 'env.maxFailedShare=1'));
      assert.equal(tolerated.code, 0, tolerated.out);
      assert.match(tolerated.out, new RegExp(`iter 1/1 \\| .* \\| env failed ${failed}/8 \\|`));
      const stopped = await cli(smoke('too-many', ...settings));
      assert.equal(stopped.code, 1, stopped.out);
      assert.match(stopped.out, new RegExp(`error: iteration 1: ${failed} of 8 episodes \\(\\d+(\\.\\d)?%\\) failed in the environment, more than env\\.maxFailedShare \\(20%\\); the first error: .*list index out of range`));
      assert.deepEqual(checkpoints('too-many'), []);
    } finally {
      await server.close();
    }
  });
});

describe('environment servers checked before the first rollout', () => {
  test('an unreachable server, and one serving another environment, stop train with a non-zero exit naming both', slow, async () => {
    const shop = await serveEnvironment(new ShopEnvironment());
    const gone = await serveAlfworld();
    await gone.close();
    try {
      const unreachable = await cli(smoke('unreachable', `env.url=${gone.url}`));
      assert.equal(unreachable.code, 1);
      assert.match(unreachable.out, /error: environment server http:\/\/127\.0\.0\.1:\d+: GET \/health failed.*is the server running\?/);
      assert.doesNotMatch(unreachable.out, /^GPU: /m, 'refused before the GPU starts');
      const agentgym = await cli(smoke('unreachable-ag', 'env.agentgym=true', `env.url=${gone.url}`));
      assert.equal(agentgym.code, 1);
      assert.match(agentgym.out, /error: AgentGym alfworld server .*: GET \/ failed.*env\.url should name a running agentenv-alfworld server/);
      const wrong = await cli(smoke('wrong', `env.url=${shop.url}`));
      assert.equal(wrong.code, 1);
      assert.match(wrong.out, /error: environment server http:\/\/127\.0\.0\.1:\d+ serves the shop environment, but the config's env is household/);
      for (const run of ['unreachable', 'unreachable-ag', 'wrong']) assert.deepEqual(checkpoints(run), []);
    } finally {
      await shop.close();
    }
  });
});
