// Rollouts on a fleet, through the CLI: three `serve` processes and two environment
// servers in one run, the episodes spread over them, one inference server killed
// mid-iteration, after its episodes have played a turn (they start over on the others
// and every episode is in the trajectory file once, naming the server that ran it); an
// environment server closed mid-iteration (its episodes start over on the other); a
// server that misses a push, with full weights on `serve` processes and with LoRA on
// servers that answer as vLLM's adapter routes, serving nothing until it has caught
// up; a server down at the start: the run starts on the other and takes it in once it
// answers (or, asked to wait for every server, stops at once since nothing listens
// there); and the embedded default's curve on two `serve` processes against the local
// engine's.

import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { HouseholdEnvironment } from '../envs/household/env.ts';
import { serveEnvironment, type EnvServerHandle } from '../envs/server.ts';
import type { CreateOptions, EnvSession, Environment } from '../src/envs/types.ts';
import { loadCausalLM } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { gpu } from './support/gpu.ts';
import { startVllmStandin, type VllmStandin } from './support/vllm_standin.ts';
import { ROOT, runCli, startServe } from './support/cli_process.ts';

const MODEL = path.join(ROOT, 'models', 'household-micro');
const slow = { timeout: 600_000 };
const out = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-fleet-')));
const ENV = { ...process.env, EGL_PLATFORM: 'surfaceless', WGT_SERVER_LOCKS: path.join(out, 'locks'), VLLM_API_KEY: '', OPENAI_API_KEY: '' };

const children: ChildProcess[] = [];
const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const close of closers) await close();
  fs.rmSync(out, { recursive: true, force: true });
});

const cli = (args: string[]) => runCli(args, ENV);

/** `serve MODEL` in a process of its own; resolves with its URL once it listens. */
async function serveProcess(model = MODEL): Promise<{ url: string; child: ChildProcess }> {
  const { child, url } = startServe([model, '--port', '0', '--served-model-name', 'policy', '--allowed-root', out], ENV);
  children.push(child);
  return { url: await url, child };
}

/** One request a proxy passed on or refused. */
interface Passed {
  path: string;
  body: string;
  status: number;
  at: number;
}

/**
 * A proxy in front of a server, recording every request; `refuse` makes it answer 500
 * in vLLM's error shape instead (a server failing a reload), so a test sees from the
 * server's side which requests reached it and when.
 */
async function recordingProxy(target: string): Promise<{ url: string; seen: Passed[]; refuse: ((path: string, body: string) => boolean) | null }> {
  const handle = { url: '', seen: [] as Passed[], refuse: null as ((path: string, body: string) => boolean) | null };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString();
    const at = performance.now();
    const path = req.url ?? '';
    if (handle.refuse?.(path, body)) {
      handle.seen.push({ path, body, status: 500, at });
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'the worker failed to reload its weights', type: 'InternalServerError', param: null, code: 500 } }));
      return;
    }
    try {
      const r = await fetch(target + path, { method: req.method, headers: { 'content-type': 'application/json' }, body: req.method === 'GET' ? undefined : body });
      const answer = Buffer.from(await r.arrayBuffer());
      handle.seen.push({ path, body, status: r.status, at });
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
      res.end(answer);
    } catch {
      res.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  handle.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  return handle;
}

/** A completion that generates (not the weights probe, which asks for prompt_logprobs). */
const generation = (x: Passed) => x.path === '/v1/completions' && JSON.parse(x.body).prompt_logprobs === undefined;

/** The household behind a counter of the sessions it makes and the steps they take. */
class CountingHousehold implements Environment {
  private readonly inner = new HouseholdEnvironment();
  readonly name = this.inner.name;
  readonly version = this.inner.version;
  readonly maxSteps = this.inner.maxSteps;
  created = 0;
  steps = 0;
  onStep: (() => void) | null = null;
  onCreate: (() => void) | null = null;

  create(opts: CreateOptions): EnvSession {
    this.created++;
    this.onCreate?.();
    const session = this.inner.create(opts);
    return {
      task: session.task,
      reset: () => session.reset(),
      step: (action: string) => {
        this.steps++;
        this.onStep?.();
        return session.step(action);
      },
      close: () => session.close(),
    };
  }
}

async function envServer(): Promise<{ env: CountingHousehold; server: EnvServerHandle }> {
  const env = new CountingHousehold();
  const server = await serveEnvironment(env, { port: 0 });
  closers.push(() => server.close());
  return { env, server };
}

const smoke = (name: string, ...overrides: string[]) => [
  'train', 'examples/smoke.yaml', '--full-size', `output.dir=${out}`, `output.runName=${name}`, 'output.progress=none',
  'rollout.maxPromptTokens=400', 'validation.tasks=1', ...overrides,
];

const list = (urls: string[]) => JSON.stringify(urls);

describe('rollouts on a fleet of servers, through the CLI', () => {
  before(() => gpu());

  test('three serve processes and two environment servers: episodes spread; a server killed mid-iteration leaves every episode in the file once', slow, async () => {
    const serves = await Promise.all([serveProcess(), serveProcess(), serveProcess()]);
    const envs = [await envServer(), await envServer()];
    // Iteration 2 opens sessions 9 to 16; the first serve dies once three of their first
    // turns are played, so the episodes it runs have turns behind them and more to come.
    const killed = serves[0];
    let fired = false;
    let stepsBefore: number | null = null;
    const steps = () => envs[0].env.steps + envs[1].env.steps;
    for (const e of envs) {
      e.env.onCreate = () => {
        if (stepsBefore === null && envs[0].env.created + envs[1].env.created > 8) stepsBefore = steps();
      };
      e.env.onStep = () => {
        if (!fired && stepsBefore !== null && steps() - stepsBefore >= 3) {
          fired = true;
          killed.child.kill('SIGKILL');
        }
      };
    }
    const r = await cli(smoke('fleet',
      'rollout.engine=http', `rollout.url=${list(serves.map((s) => s.url))}`, `env.url=${list(envs.map((e) => e.server.url))}`,
      'rollout.tasksPerIteration=4', 'rollout.groupSize=2', 'rollout.maxTurns=3', 'rollout.failoverSeconds=2', 'iterations=2', 'validation.every=0', 'optim.lr=1e-3',
    ));
    assert.equal(r.code, 0, r.out);
    assert.ok(fired, 'the kill fired');
    assert.match(r.out, new RegExp(`server ${killed.url.replace(/[.]/g, '\\.')} is out of the pool`));
    for (const it of [1, 2]) {
      const episodes = readTrajectoryLog(path.join(out, 'fleet', 'rollouts', `iter-${it}.jsonl`));
      assert.equal(episodes.length, 8, `iteration ${it}: every episode once`);
      assert.equal(new Set(episodes.map((t) => t.trajectoryId)).size, 8);
      for (const t of episodes) {
        assert.equal(t.error, undefined, t.error);
        assert.ok(serves.some((s) => s.url === t.server), `iteration ${it}: ${t.trajectoryId} names ${t.server}`);
        assert.equal(t.policyVersion, it - 1, 'the version of the weights that generated it');
        assert.ok(envs.some((e) => e.server.url === t.envServer));
      }
      const servers = new Set(episodes.map((t) => t.server));
      if (it === 1) assert.equal(servers.size, 3, 'episodes spread over the three servers');
      else {
        // Only an episode that ended at its first turn, before the server died, is counted there.
        for (const t of episodes.filter((x) => x.server === killed.url)) assert.equal(t.turns.length, 1, `${t.trajectoryId} ran on the killed server`);
        const restarted = episodes.filter((t) => /left the pool/.test(t.restartedBecause ?? ''));
        assert.ok(restarted.some((t) => /^turn [1-9]/.test(t.restartedBecause!)), 'its episodes, some with turns played, started over elsewhere');
        for (const t of restarted) assert.notEqual(t.server, killed.url);
      }
      assert.equal(new Set(episodes.map((t) => t.envServer)).size, 2, 'sessions on both environment servers');
    }
    const rows = readMetrics(path.join(out, 'fleet', 'metrics.jsonl'));
    for (const row of rows) {
      const perServer = Object.entries(row).filter(([k]) => /^server\/.+\/episodes$/.test(k)).reduce((n, [, v]) => n + (v as number), 0);
      assert.equal(perServer, 8, `iteration ${row.iteration}: the servers' episodes add up to the iteration's`);
      assert.equal(row['rollout/trajectories'], 8);
    }
    assert.equal(rows[1]['fleet/servers_in_pool'], 2);
    assert.match(r.out, /servers: 127\.0\.0\.1:\d+ \d+ episodes, \d+ tokens, [\d.]+ s/);
  });

  test('an environment server closed mid-iteration: its episodes start over on the other', slow, async () => {
    const envs = [await envServer(), await envServer()];
    let closed = false;
    envs[0].env.onStep = () => {
      if (!closed && envs[0].env.steps === 3) {
        closed = true;
        setImmediate(() => void envs[0].server.close());
      }
    };
    const r = await cli(smoke('envfleet', `env.url=${list(envs.map((e) => e.server.url))}`, 'rollout.tasksPerIteration=4', 'rollout.groupSize=2', 'rollout.maxTurns=3', 'validation.every=0'));
    assert.equal(r.code, 0, r.out);
    assert.ok(closed);
    assert.match(r.out, /environment server .* stopped answering .* its episodes start over on the others/);
    const episodes = readTrajectoryLog(path.join(out, 'envfleet', 'rollouts', 'iter-1.jsonl'));
    assert.equal(episodes.length, 8);
    assert.equal(new Set(episodes.map((t) => t.trajectoryId)).size, 8);
    const restarted = episodes.filter((t) => t.restartedBecause !== undefined);
    assert.ok(restarted.length > 0 && restarted.every((t) => t.envServer === envs[1].server.url && /stopped answering/.test(t.restartedBecause!)));
    assert.ok(episodes.every((t) => t.error === undefined));
  });

  test('full weights on two serve processes: a server whose reload fails is out of the pool until it holds the current step', slow, async () => {
    const [a, direct] = await Promise.all([serveProcess(), serveProcess()]);
    const b = await recordingProxy(direct.url);
    b.refuse = (p, body) => p === '/collective_rpc' && /policy-step-1"/.test(body);
    const r = await cli(smoke('fullfleet', 'rollout.engine=http', `rollout.url=${list([a.url, b.url])}`, 'optim.lr=1e-2',
      'rollout.tasksPerIteration=2', 'rollout.groupSize=2', 'rollout.maxTurns=2', 'iterations=4', 'validation.every=0', 'rollout.failoverSeconds=2'));
    assert.equal(r.code, 0, r.out);
    const at = b.url.replace(/[.]/g, '\\.');
    assert.match(r.out, new RegExp(`server ${at} is out of the pool \\(missed the push of step 1`));
    assert.match(r.out, new RegExp(`server ${at} is back in the pool with step 2`));
    const reload = (x: Passed, step: number) => x.path === '/collective_rpc' && x.body.includes(`policy-step-${step}"`);
    const refused = b.seen.findIndex((x) => reload(x, 1) && x.status === 500);
    const caughtUp = b.seen.findIndex((x) => reload(x, 2) && x.status === 200);
    assert.ok(refused >= 0 && caughtUp > refused, 'b failed step 1, then took step 2');
    assert.ok(b.seen.slice(0, refused).some(generation), 'b rolled out before it missed the push');
    assert.deepEqual(b.seen.slice(refused, caughtUp).filter(generation), [], 'b served nothing while it missed step 1');
    assert.ok(readTrajectoryLog(path.join(out, 'fullfleet', 'rollouts', 'iter-2.jsonl')).every((t) => t.server === a.url && t.policyVersion === 1));
    // b is back before a rollout only if it answers within a second then (ensureCurrent): on a loaded machine that
    // can be iteration 4's rather than 3's.
    const later = [3, 4].map((i) => readTrajectoryLog(path.join(out, 'fullfleet', 'rollouts', `iter-${i}.jsonl`)));
    assert.ok(later.some((episodes) => episodes.some((t) => t.server === b.url)), 'b takes episodes again once it has caught up');
    later.forEach((episodes, k) => assert.ok(episodes.every((t) => t.policyVersion === k + 2)));
    const rows = readMetrics(path.join(out, 'fullfleet', 'metrics.jsonl'));
    assert.equal(rows[0]['fleet/servers_in_pool'], 1, 'b is out once the push of step 1 failed');
    assert.equal(rows[3]['fleet/servers_in_pool'], 2);
  });

  test('LoRA on two vLLM-like servers: a server that misses a push serves nothing until it has caught up', slow, async () => {
    const standins: VllmStandin[] = [];
    for (let i = 0; i < 2; i++) {
      const engine = new LocalEngine(loadCausalLM(MODEL, { trainable: false }) as never, { tokenizer: await loadTokenizer(MODEL), name: 'policy', path: MODEL });
      const s = await startVllmStandin(engine, { modelDir: MODEL, servedModelName: 'policy', allowedRoot: out, runtimeLora: true, maxModelLen: 512 });
      closers.push(() => s.close());
      standins.push(s);
    }
    const [a, b] = standins;
    b.refuseLoad = (name) => /-step-1$/.test(name);
    const r = await cli(smoke('lorafleet', 'rollout.engine=http', `rollout.url=${list([a.url, b.url])}`, 'model.lora={"r":2,"alpha":4}', 'optim.lr=1e-2',
      'rollout.tasksPerIteration=2', 'rollout.groupSize=2', 'rollout.maxTurns=2', 'iterations=3', 'validation.every=0', 'rollout.failoverSeconds=2'));
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`server ${b.url.replace(/[.]/g, '\\.')} is out of the pool \\(missed the push of step 1`));
    assert.match(r.out, new RegExp(`server ${b.url.replace(/[.]/g, '\\.')} is back in the pool with step 2`));
    // Across both servers, in time: every generation names the newest adapter loaded anywhere.
    const loads = [...a.seen, ...b.seen].filter((x) => x.path === '/v1/load_lora_adapter' && x.status === 200).sort((x, y) => x.at - y.at);
    for (const s of standins) {
      for (const g of s.seen.filter((x) => x.path === '/v1/completions' && !x.scoring)) {
        const newest = loads.filter((l) => l.at < g.at).map((l) => /step-(\d+)$/.exec(l.model!)![1]).map(Number).reduce((m, n) => Math.max(m, n), -1);
        assert.equal(g.model, g.adapters.find((n) => n.endsWith(`-step-${newest}`)), `a generation on ${s === a ? 'a' : 'b'} named ${g.model}, the newest version was ${newest}`);
      }
    }
    const refused = b.seen.findIndex((x) => x.path === '/v1/load_lora_adapter' && x.status === 500);
    const caughtUp = b.seen.findIndex((x) => x.path === '/v1/load_lora_adapter' && x.status === 200 && /-step-2$/.test(x.model!));
    assert.ok(refused >= 0 && caughtUp > refused);
    assert.deepEqual(b.seen.slice(refused, caughtUp).filter((x) => x.path === '/v1/completions' && !x.scoring), [], 'b served nothing while it missed step 1');
    const third = readTrajectoryLog(path.join(out, 'lorafleet', 'rollouts', 'iter-3.jsonl'));
    assert.ok(third.some((t) => t.server === b.url), 'b takes episodes again once it has caught up');
    assert.ok(readTrajectoryLog(path.join(out, 'lorafleet', 'rollouts', 'iter-2.jsonl')).every((t) => t.server === a.url));
  });

  test('a server down at the start: the run starts on the other and takes it in once it answers; asked to wait for all, it stops in seconds', slow, async () => {
    const standins: VllmStandin[] = [];
    for (let i = 0; i < 2; i++) {
      const engine = new LocalEngine(loadCausalLM(MODEL, { trainable: false }) as never, { tokenizer: await loadTokenizer(MODEL), name: 'policy', path: MODEL });
      const s = await startVllmStandin(engine, { modelDir: MODEL, servedModelName: 'policy', allowedRoot: out, devMode: true, reloadTakesPath: true, maxModelLen: 512 });
      closers.push(() => s.close());
      standins.push(s);
    }
    const [a, b] = standins;
    const at = b.url.replace(/[.]/g, '\\.');
    const words = (name: string, ...more: string[]) => smoke(name, 'rollout.engine=http', `rollout.url=${list([a.url, b.url])}`, 'optim.lr=1e-2',
      'rollout.tasksPerIteration=2', 'rollout.groupSize=2', 'rollout.maxTurns=2', 'validation.every=0', ...more);
    // b's port refuses connections for the first 15 s of the run, then b answers as a fresh process.
    const down = b.restart(15_000);
    const started = performance.now();
    const all = await cli(words('waitall', 'rollout.waitForAllServers=true'));
    assert.equal(all.code, 1, all.out);
    assert.match(all.out, new RegExp(`rollout server ${at} \\(.*\\) refuses connections: nothing listens there`));
    assert.ok(performance.now() - started < 15_000, 'stopped while b was still down');
    const r = await cli(words('oneup', 'iterations=5'));
    await down;
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`rollout server ${at} is not answering \\(.*\\): the run starts with 1 of 2 servers and takes it in once it answers \\(rollout\\.waitForAllServers=true waits for every server instead\\)`));
    assert.match(r.out, new RegExp(`server ${at} answers and joins the pool with step \\d`));
    const back = b.seen.find((x) => x.method === 'RESTARTED')!.at;
    assert.ok(a.seen.some((x) => x.path === '/v1/completions' && !x.scoring && x.at < back), 'a rolled out while b was down');
    const episodes = [1, 2, 3, 4, 5].flatMap((i) => readTrajectoryLog(path.join(out, 'oneup', 'rollouts', `iter-${i}.jsonl`)));
    assert.ok(episodes.some((t) => t.server === b.url), 'b took episodes once it had joined');
    assert.ok(episodes.every((t) => t.error === undefined));
  });

  test('the embedded default on two serve processes learns as on the local engine (same seeds: the same episodes and updates)', slow, async () => {
    const tiny = path.join(ROOT, 'models', 'household-tiny');
    const serves = await Promise.all([serveProcess(tiny), serveProcess(tiny)]);
    // The bundled model's 2048 positions hold the prompt budget, 40 response tokens (scaled down) and the scored token.
    const common = ['train', 'iterations=2', `output.dir=${out}`, 'output.progress=none', 'rollout.maxPromptTokens=2000'];
    const local = await cli([...common, 'output.runName=ed-local']);
    assert.equal(local.code, 0, local.out);
    const fleet = await cli([...common, 'output.runName=ed-fleet', 'rollout.engine=http', `rollout.url=${list(serves.map((s) => s.url))}`]);
    assert.equal(fleet.code, 0, fleet.out);
    for (const it of [1, 2]) {
      const [a, b] = ['ed-local', 'ed-fleet'].map((run) => readTrajectoryLog(path.join(out, run, 'rollouts', `iter-${it}.jsonl`)));
      assert.deepEqual(b.map((t) => t.turns.map((u) => u.response)), a.map((t) => t.turns.map((u) => u.response)), `iteration ${it}: the same responses`);
      assert.equal(new Set(b.map((t) => t.server)).size, 2, 'both servers rolled out');
    }
    const [a, b] = ['ed-local', 'ed-fleet'].map((run) => readMetrics(path.join(out, run, 'metrics.jsonl')));
    assert.equal(b.length, a.length);
    a.forEach((row, i) => {
      for (const key of ['rollout/return', 'rollout/success', 'actor/entropy', 'actor/grad_norm', 'actor/kl', 'actor/pg_loss']) {
        if (!(key in row)) continue;
        const [x, y] = [row[key] as number, b[i][key] as number];
        assert.ok(Math.abs(x - y) <= 1e-4 * Math.max(1, Math.abs(x)), `iteration ${row.iteration} ${key}: local ${x}, fleet ${y}`);
      }
    });
  });
});
