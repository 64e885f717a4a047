// Rollouts on a fleet, through the CLI: three `serve` processes and two environment
// servers in one run, the episodes spread over them, one inference server killed as an
// iteration's episodes start (they start over on the others and every episode is in
// the trajectory file once, naming the server that ran it); an environment server
// closed mid-iteration (its episodes start over on the other); two servers that
// answer as vLLM's adapter routes with LoRA, one missing a push, which then serves
// nothing until it has caught up; and the embedded default's curve on two `serve`
// processes against the local engine's.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { HouseholdEnvironment } from '../envs/household/env.ts';
import { serveEnvironment, type EnvServerHandle } from '../envs/server.ts';
import type { CreateOptions, EnvSession, Environment } from '../src/envs/types.ts';
import { loadCausalLM } from '../src/models/load.ts';
import { loadTokenizer } from '../src/models/tokenizer.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { LocalEngine } from '../src/rollout/local_engine.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { gpu } from './support/gpu.ts';
import { startVllmStandin, type VllmStandin } from './support/vllm_standin.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const MAIN = path.join(ROOT, 'src', 'cli', 'main.ts');
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

function cli(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], { cwd: ROOT, env: ENV });
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    child.on('close', (code) => resolve({ code, out: text }));
  });
}

/** `serve MODEL` in a process of its own; resolves with its URL once it listens. */
function serveProcess(model = MODEL): Promise<{ url: string; child: ChildProcess }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, 'serve', model, '--port', '0', '--served-model-name', 'policy', '--allowed-root', out], { cwd: ROOT, env: ENV });
    children.push(child);
    let text = '';
    const seen = (d: Buffer) => {
      text += d;
      const m = /serving .* at (http:\/\/\S+)/.exec(text);
      if (m) resolve({ url: m[1], child });
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${text}`)));
  });
}

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

  test('three serve processes and two environment servers: episodes spread; a server killed as an iteration starts leaves every episode in the file once', slow, async () => {
    const serves = await Promise.all([serveProcess(), serveProcess(), serveProcess()]);
    const envs = [await envServer(), await envServer()];
    // Iteration 2 opens sessions 9 to 16 before its first request: the first serve dies then.
    const killed = serves[0];
    let fired = false;
    for (const e of envs) {
      e.env.onCreate = () => {
        if (!fired && envs[0].env.created + envs[1].env.created > 8) {
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
        assert.ok(!servers.has(killed.url), 'nothing in iteration 2 is counted on the killed server');
        assert.ok(episodes.some((t) => /left the pool/.test(t.restartedBecause ?? '')), 'its episodes started over elsewhere');
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
});
