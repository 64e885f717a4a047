// `train` and `eval` through the CLI against a server that answers as vLLM's OpenAI
// server does (tests/support/vllm_standin.ts), checked from the server's side: a LoRA
// run's rollouts and teacher scores name the adapter of the current step, with an API
// key that never reaches the run directory or the log; a server restarted mid-run
// (ten seconds down) gets the current weights back before the next rollout and costs
// only time, and so does one that restarts right after an adapter swap (its new
// adapter forgotten); a server holding other weights at the start is found and fixed;
// a context too short for the run, a missing sync route, a missing key, a server
// another run syncs and a server that cannot load the run's weights (a vLLM whose
// reload_weights takes no path) stop the run before any rollout; nothing listening at
// the address stops it in seconds, naming the setting that would wait; a push that
// fails after an update stops the run with the iteration saved; `eval --engine http
// --served-model` evaluates what a server serves, and a server that is not there
// stops eval in seconds.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { loadCausalLM, randomModel, saveModel } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { WriterLock } from '../src/fleet/writer_lock.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { gpu } from './support/gpu.ts';
import { startVllmStandin, type VllmStandin, type VllmStandinOptions } from './support/vllm_standin.ts';
import { ROOT, runCli } from './support/cli_process.ts';

const MODEL = path.join(ROOT, 'models', 'household-micro');
const slow = { timeout: 600_000 };
const out = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-vllm-')));
const locks = path.join(out, 'locks');
after(() => fs.rmSync(out, { recursive: true, force: true }));

/** The CLI in a child process, so the server in this one keeps answering while it runs. */
const cli = (args: string[], env: Record<string, string> = {}) =>
  runCli(args, { WGT_SERVER_LOCKS: locks, VLLM_API_KEY: '', OPENAI_API_KEY: '', ...env });

/** The smoke run (one task of two runs, two turns) in its own directory, against `url`. */
const smoke = (name: string, url: string, ...overrides: string[]) => [
  'train', 'examples/smoke.yaml', '--full-size', `output.dir=${out}`, `output.runName=${name}`,
  'rollout.engine=http', `rollout.url=${url}`, 'rollout.tasksPerIteration=1', 'rollout.maxTurns=2', 'rollout.maxPromptTokens=400',
  'validation.tasks=1', 'output.progress=none', ...overrides,
];

let servers: VllmStandin[] = [];
async function standin(o: Partial<VllmStandinOptions> = {}): Promise<VllmStandin> {
  await gpu();
  const engine = new LocalEngine(loadCausalLM(MODEL, { trainable: false }) as never, { tokenizer: await loadTokenizer(MODEL), name: 'policy', path: MODEL });
  const s = await startVllmStandin(engine, { modelDir: MODEL, servedModelName: 'policy', allowedRoot: out, ...o });
  servers.push(s);
  return s;
}
after(async () => {
  for (const s of servers) await s.close();
  servers = [];
});

const generations = (s: VllmStandin) => s.seen.filter((r) => r.path === '/v1/completions' && !r.scoring);

/** An address where nothing listens: a port taken and given back. */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

describe('rollouts through a vLLM-faithful server, through the CLI', () => {
  before(() => gpu());

  test('LoRA: every rollout and teacher score names the current step\'s adapter; the API key reaches the server only', slow, async () => {
    const key = 'sk-test-4f1c9a';
    const s = await standin({ runtimeLora: true, apiKey: key, maxModelLen: 512 });
    const r = await cli(smoke('lora', s.url, 'method=sdar', 'teacher.engine=http', `teacher.url=${s.url}`, 'iterations=2', 'model.lora={"r":2,"alpha":4}', 'optim.lr=1e-2', `rollout.apiKey=${key}`, `teacher.apiKey=${key}`));
    assert.equal(r.code, 0, r.out);
    const completions = s.seen.filter((x) => x.path === '/v1/completions');
    const loads = s.seen.filter((x) => x.path === '/v1/load_lora_adapter' && x.model !== undefined).map((x) => x.model!);
    assert.equal(loads.length, 3, `one adapter per version (steps 0, 1, 2): ${loads.join()}`);
    loads.forEach((name, i) => assert.match(name, new RegExp(`^policy-[0-9a-f]{8}-step-${i}$`)));
    assert.ok(completions.some((x) => x.scoring && x.model !== undefined) && generations(s).length > 0);
    // Each request names the newest adapter the server held when it came.
    for (const x of completions) {
      const newest = x.adapters.filter((a) => loads.includes(a)).sort((a, b) => loads.indexOf(b) - loads.indexOf(a))[0];
      assert.equal(x.model, newest, `a request named ${x.model} while the server held ${x.adapters.join()}`);
      assert.equal(x.status, 200);
    }
    assert.deepEqual(s.adapters(), [loads[2]], 'earlier versions were unloaded');
    const runDir = path.join(out, 'lora');
    const written = ['config.json', 'report.html', 'metrics.jsonl'].map((f) => path.join(runDir, f));
    for (const file of written) assert.ok(fs.existsSync(file) && !fs.readFileSync(file, 'utf8').includes(key), `${file} holds the key`);
    assert.ok(!r.out.includes(key), 'the log shows the key');
    assert.equal(JSON.parse(fs.readFileSync(written[0], 'utf8')).rollout.apiKey, undefined);
  });

  test('a server restarted mid-run (10 s down) gets the current weights back before the next rollout; the run goes on', slow, async () => {
    const s = await standin({ devMode: true, reloadTakesPath: true, maxModelLen: 512 });
    const run = cli(smoke('restart', s.url, 'iterations=3', 'optim.lr=1e-2', 'validation.every=0'));
    // Restart once the first update has been pushed.
    const pushed = async () => {
      while (!s.seen.some((x) => x.path === '/collective_rpc')) await new Promise((res) => setTimeout(res, 100));
    };
    await Promise.race([pushed(), run]);
    await s.restart(10_000);
    const r = await run;
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /not answering|cannot reach the server/);
    const back = s.seen.findIndex((x) => x.method === 'RESTARTED');
    assert.equal(s.seen[back].weights, MODEL, 'the restarted server is on its base weights');
    const after = s.seen.slice(back);
    const reload = after.findIndex((x) => x.path === '/collective_rpc');
    const firstGeneration = after.findIndex((x) => x.path === '/v1/completions' && !x.scoring);
    assert.ok(reload >= 0 && firstGeneration > reload, JSON.stringify(after.slice(0, 10).map((x) => [x.method, x.path, x.scoring, x.weights, x.status])) + ` the weights were pushed again (request ${reload}) before the next rollout (request ${firstGeneration})`);
    // From the first push on, no rollout was served by the base weights.
    const firstPush = s.seen.findIndex((x) => x.path === '/collective_rpc');
    const served = generations({ seen: s.seen.slice(firstPush) } as VllmStandin);
    assert.ok(served.length > 0 && served.every((x) => x.weights !== MODEL && /sync[/\\]policy-step-\d+$/.test(x.weights!)), served.map((x) => x.weights).join());
    assert.match(s.basePath()!, /sync[/\\]policy-step-3$/, 'the server ends on the last version');
    const metrics = fs.readFileSync(path.join(out, 'restart', 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(metrics.map((m) => m.iteration), [1, 2, 3], 'no iteration was lost');
    for (const it of [1, 2, 3]) assert.equal(readTrajectoryLog(path.join(out, 'restart', 'rollouts', `iter-${it}.jsonl`)).length, 2);
  });

  test('a server holding other weights at the start is found and given the run\'s', slow, async () => {
    const s = await standin({ devMode: true, reloadTakesPath: true, maxModelLen: 512 });
    // Another run's weights: the same architecture, other values.
    const other = path.join(out, 'other-weights');
    const m = loadCausalLM(MODEL, { trainable: false });
    const stranger = randomModel(m.config, 11);
    await saveModel(stranger, other, { tokenizerDir: MODEL });
    for (const p of [...m.parameters(), ...stranger.parameters()]) p.dispose();
    await fetch(`${s.url}/collective_rpc`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ method: 'reload_weights', kwargs: { weights_path: other } }) });
    assert.equal(s.basePath(), other);
    const r = await cli(smoke('stale', s.url, 'validation.every=0'));
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /holds other weights than the run's step 0 \(the weights probe differs by [\d.]+ nats\/token/);
    const firstGeneration = s.seen.findIndex((x) => x.path === '/v1/completions' && !x.scoring);
    const reload = s.seen.findIndex((x) => x.path === '/collective_rpc');
    assert.ok(reload >= 0 && reload < firstGeneration, 'pushed before the first rollout');
  });

  test('stopped before any work: too short a context, missing sync routes, no API key, another run syncing the server', slow, async () => {
    const short = await standin({ devMode: true, maxModelLen: 300 });
    let r = await cli(smoke('short', short.url));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /rollout\.maxPromptTokens \(400\) \+ rollout\.maxResponseTokens \(32\) \+ 1 .* = 433 tokens do not fit the context of rollout server .* \(max_model_len 300\): start vLLM with --max-model-len 433/);
    assert.ok(!fs.existsSync(path.join(out, 'short')), 'no run directory was made');
    assert.deepEqual(generations(short), []);

    const plain = await standin({ maxModelLen: 512 });
    r = await cli(smoke('nodev', plain.url));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /has no \/collective_rpc, which full-weight sync needs: start vLLM with VLLM_SERVER_DEV_MODE=1/);
    r = await cli(smoke('nolora', plain.url, 'model.lora={"r":2,"alpha":4}'));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /has no \/v1\/load_lora_adapter, which LoRA weight sync needs: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True/);

    const keyed = await standin({ devMode: true, apiKey: 'right', maxModelLen: 512 });
    r = await cli(smoke('nokey', keyed.url));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /wants an API key \(it was started with --api-key\): set rollout\.apiKey, or VLLM_API_KEY or OPENAI_API_KEY/);
    r = await cli(smoke('badkey', keyed.url), { OPENAI_API_KEY: 'wrong' });
    assert.match(r.out, /the key given was refused/);
    assert.ok(!r.out.includes('wrong'));

    const held = await standin({ devMode: true, reloadTakesPath: true, maxModelLen: 512 });
    const lock = WriterLock.acquire(held.url, path.join(out, 'someone-else'), locks);
    try {
      r = await cli(smoke('second', held.url));
      assert.notEqual(r.code, 0);
      assert.match(r.out, new RegExp(`another run pushes its weights into this server \\(process ${process.pid}, ${path.join(out, 'someone-else').replace(/[/\\.]/g, '\\$&')}`));
    } finally {
      lock.release();
    }
    assert.deepEqual(generations(held), [], 'the refused run sent no rollout');
  });

  test('a server that cannot load the run\'s weights (vLLM before 0.16: reload_weights takes no path) stops the run before the first rollout', slow, async () => {
    const s = await standin({ devMode: true, reloadTakesPath: false, maxModelLen: 512 });
    const r = await cli(smoke('oldvllm', s.url, 'checkpoint.every=5', 'iterations=3'));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /rollout server .* cannot load the run's weights \(.*sync[/\\]policy-step-0\): .*unexpected keyword argument 'weights_path'.*vLLM 0\.16 or later/);
    assert.deepEqual(generations(s), [], 'no rollout');
    assert.ok(!fs.existsSync(path.join(out, 'oldvllm', 'rollouts', 'iter-1.jsonl')));
  });

  test('a push that fails after an update stops the run with the iteration saved', slow, async () => {
    const s = await standin({ runtimeLora: true, maxModelLen: 512 });
    s.refuseLoad = (name) => /-step-1$/.test(name);
    const r = await cli(smoke('failedpush', s.url, 'checkpoint.every=5', 'iterations=3', 'model.lora={"r":2,"alpha":4}'));
    assert.notEqual(r.code, 0);
    assert.match(r.out, /iteration 1: pushing the weights to the servers failed; the update is saved below/);
    assert.match(r.out, /Failed to load the LoRA adapter 'policy-[0-9a-f]{8}-step-1'/);
    assert.deepEqual(fs.readdirSync(path.join(out, 'failedpush', 'checkpoints')).filter((n) => n.startsWith('ckpt-')), ['ckpt-1'], 'the update is saved although no checkpoint was due');
  });

  test('LoRA: a server that restarts right after the adapter swap (step 1 loaded, step 0 unloaded) gets step 1 again; the run goes on', slow, async () => {
    const s = await standin({ runtimeLora: true, maxModelLen: 512 });
    let crashed = false;
    s.crashAfter = (x) => {
      if (crashed || x.path !== '/v1/unload_lora_adapter' || x.status !== 200 || !/-step-0$/.test(x.model ?? '')) return null;
      crashed = true;
      return 1000;
    };
    const r = await cli(smoke('loraswap', s.url, 'iterations=2', 'model.lora={"r":2,"alpha":4}', 'optim.lr=1e-2', 'validation.every=0'));
    assert.equal(r.code, 0, r.out);
    assert.ok(crashed, 'the server crashed after the swap');
    const back = s.seen.findIndex((x) => x.method === 'RESTARTED');
    const after = s.seen.slice(back);
    // The first request after the restart names step 1's adapter, which the server no longer knows: 404, as vLLM answers.
    const unknown = after.findIndex((x) => x.path === '/v1/completions' && /-step-1$/.test(x.model ?? '') && x.status === 404);
    const reload = after.findIndex((x) => x.path === '/v1/load_lora_adapter' && x.status === 200 && /-step-1$/.test(x.model ?? ''));
    assert.ok(unknown >= 0 && reload > unknown, JSON.stringify(after.slice(0, 8).map((x) => [x.path, x.model, x.status])));
    assert.match(r.out, /no longer serves the adapter policy-[0-9a-f]{8}-step-1 \(restarted\?\): loading it again/);
    const next = after.findIndex((x) => x.path === '/v1/load_lora_adapter' && /-step-2$/.test(x.model ?? ''));
    const served = generations({ seen: after.slice(reload, next) } as VllmStandin);
    assert.ok(served.length > 0 && served.every((x) => x.status === 200 && /-step-1$/.test(x.model!)), 'iteration 2 rolled out on step 1\'s adapter');
    assert.deepEqual(readTrajectoryLog(path.join(out, 'loraswap', 'rollouts', 'iter-2.jsonl')).map((t) => t.error), [undefined, undefined]);
  });

  test('nothing listening at the address stops the run in seconds, naming the setting that waits; with it set, the wait is that long', slow, async () => {
    const url = await closedPort();
    let started = performance.now();
    const r = await cli(smoke('nobody', url));
    const seconds = (performance.now() - started) / 1000;
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, new RegExp(`rollout server ${url.replace(/[.]/g, '\\.')} \\(.*ECONNREFUSED.*\\) refuses connections: nothing listens there\\. Start the server, or correct the address; to wait for a server that is still starting, set rollout\\.serverWaitSeconds`));
    assert.doesNotMatch(r.out, /waiting for/);
    assert.ok(seconds < 45, `stopped after ${seconds.toFixed(0)} s`);
    assert.ok(!fs.existsSync(path.join(out, 'nobody')), 'no run directory');
    started = performance.now();
    const waited = await cli(smoke('nobody-wait', url, 'rollout.serverWaitSeconds=6'));
    assert.equal(waited.code, 1, waited.out);
    assert.match(waited.out, new RegExp(`rollout: no answer within 6 s \\(rollout\\.serverWaitSeconds\\) from ${url.replace(/[.]/g, '\\.')}`));
    assert.ok((performance.now() - started) / 1000 >= 6);
  });

  test('compare --parallel 2 gives each run a server of its own from rollout.url, and refuses to share one', slow, async () => {
    const [a, b] = [await standin({ runtimeLora: true, maxModelLen: 512 }), await standin({ runtimeLora: true, maxModelLen: 512 })];
    const dir = path.join(out, 'cmp');
    const words = (urls: string[]) => [
      'compare', 'examples/smoke.yaml', '--methods', 'grpo', '--seeds', '2', '--parallel', '2', '--out', dir, '--full-size',
      'rollout.engine=http', `rollout.url=${JSON.stringify(urls)}`, 'rollout.tasksPerIteration=1', 'rollout.maxTurns=2', 'rollout.maxPromptTokens=400',
      'validation.tasks=1', 'model.lora={"r":2,"alpha":4}',
    ];
    const shared = await cli(words([a.url]));
    assert.notEqual(shared.code, 0);
    assert.match(shared.out, /parallel runs would push their weights into the same server .* Give rollout\.url a list of at least 2 servers/);
    const r = await cli(words([a.url, b.url]));
    assert.equal(r.code, 0, r.out);
    // Each server saw the adapters of one run only (one tag), and both runs finished.
    const tags = (s: VllmStandin) => new Set(s.seen.filter((x) => x.path === '/v1/load_lora_adapter' && x.model).map((x) => /^policy-([0-9a-f]{8})-step/.exec(x.model!)![1]));
    assert.equal(tags(a).size, 1);
    assert.equal(tags(b).size, 1);
    assert.notDeepEqual([...tags(a)], [...tags(b)]);
    for (const run of ['grpo-s0', 'grpo-s1']) assert.ok(fs.existsSync(path.join(dir, run, 'metrics.jsonl')), run);
  });

  test('eval --engine http --served-model evaluates what the server serves, by adapter name', slow, async () => {
    const s = await standin({ runtimeLora: true, maxModelLen: 512 });
    const r = await cli(smoke('evalsrc', s.url, 'model.lora={"r":2,"alpha":4}', 'optim.lr=1e-2'));
    assert.equal(r.code, 0, r.out);
    const adapter = s.adapters()[0];
    const before = s.seen.length;
    const report = path.join(out, 'eval.json');
    const e = await cli(['eval', MODEL, '--engine', 'http', '--url', s.url, '--served-model', adapter, '--seeds', '1', '--tasks', '2', '--max-turns', '2', '--max-response-tokens', '32', '--out', report, '--progress', 'none']);
    assert.equal(e.code, 0, e.out);
    const asked = s.seen.slice(before).filter((x) => x.path === '/v1/completions').map((x) => x.model);
    assert.ok(asked.length > 0 && asked.every((m) => m === adapter), asked.join());
    const saved = JSON.parse(fs.readFileSync(report, 'utf8'));
    assert.equal(saved.episodes.length, 2);
    const missing = await cli(['eval', MODEL, '--engine', 'http', '--url', s.url, '--served-model', 'nope', '--seeds', '1', '--tasks', '1', '--progress', 'none']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.out, /does not serve "nope"/);
    const nobody = await closedPort();
    const started = performance.now();
    const gone = await cli(['eval', MODEL, '--engine', 'http', '--url', nobody, '--seeds', '1', '--tasks', '1', '--progress', 'none']);
    assert.equal(gone.code, 1, gone.out);
    assert.match(gone.out, /eval server .* refuses connections: nothing listens there\. .*set --server-wait/);
    assert.ok((performance.now() - started) / 1000 < 45);
    const waited = await cli(['eval', MODEL, '--engine', 'http', '--url', nobody, '--server-wait', '3', '--seeds', '1', '--tasks', '1', '--progress', 'none']);
    assert.match(waited.out, /eval: no answer within 3 s \(--server-wait\)/);
  });
});
