// Models from the Hugging Face Hub, against a local stand-in that answers as
// huggingface.co does (tests/support/hub_standin.ts; these machines have no network):
// a Hub id downloads into the standard cache layout, a file whose connection is cut
// resumes with a Range request (in the same command, and from a partial file a stopped
// process left), HF_HUB_OFFLINE uses the cache alone, a missing repository is named,
// train, eval, serve and score all take the id, and `export --push` uploads a
// checkpoint that then downloads back as a model.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { hubModelDir, isHubId, wantedFile } from '../src/hub/hub_model.ts';
import { TransferProgress } from '../src/hub/transfer_progress.ts';
import { HubStandIn } from './support/hub_standin.ts';
import { startServe } from './support/cli_process.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CLI = path.join(ROOT, 'src', 'cli', 'main.ts');
const MODEL = path.join(ROOT, 'models', 'household-micro');
const ID = 'wgt-test/household-micro';
const slow = { timeout: 600_000 };
const HF_VARIABLES = ['HF_ENDPOINT', 'HF_HOME', 'HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'XDG_CACHE_HOME', 'HF_HUB_OFFLINE', 'HF_TOKEN', 'HF_TOKEN_PATH'];

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const gitOid = (b: Uint8Array) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

/** The environment of a shell with only these Hugging Face settings. */
function hfEnv(vars: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of HF_VARIABLES) delete env[k];
  return { ...env, ...vars };
}

/** The CLI as a child that does not block this process, which serves the stand-in. */
function cli(args: string[], vars: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: hfEnv(vars), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

const tmp = (tag: string) => fs.mkdtempSync(path.join(os.tmpdir(), `wgt-hub-${tag}-`));

describe('Hub ids and files', () => {
  test('owner/name is a Hub id; paths, single names and what the cache reserves are not', () => {
    for (const id of ['Qwen/Qwen2.5-0.5B-Instruct', 'meta-llama/Llama-3.2-1B', 'a/b.c_d']) assert.ok(isHubId(id), id);
    for (const p of ['gpt2', './Qwen/x', '/models/x', 'a/b/c', 'a--b/c', 'a/..b', 'a/b.git', '-a/b', 'runs/x/']) assert.ok(!isHubId(p), p);
  });

  test('what the trainer reads is downloaded, nothing else', () => {
    for (const f of ['config.json', 'model-00001-of-00002.safetensors', 'model.safetensors.index.json', 'tokenizer.json', 'merges.txt', 'chat_template.jinja', 'additional_chat_templates/tool_use.jinja']) assert.ok(wantedFile(f), f);
    for (const f of ['README.md', '.gitattributes', 'pytorch_model.bin', 'onnx/model.onnx', 'original/params.json', 'LICENSE']) assert.ok(!wantedFile(f), f);
  });

  test('progress: a line per file in a pipe, one line redrawn on a terminal', () => {
    let t = 0;
    const pipe: string[] = [];
    const p = new TransferProgress({ write: (s) => pipe.push(s) }, () => t);
    const f = p.file('model.safetensors', 3_000_000);
    for (let i = 0; i < 300; i++) {
      t += 10;
      f.advance(10_000);
    }
    f.done();
    assert.deepEqual(pipe, ['  model.safetensors  3.0 MB in 3.0 s (1.0 MB/s)\n']);
    const term: string[] = [];
    t = 0;
    const q = new TransferProgress({ write: (s) => term.push(s), isTTY: true }, () => t);
    const g = q.file('model.safetensors', 3_000_000);
    for (let i = 0; i < 300; i++) {
      t += 10;
      g.advance(10_000);
    }
    g.done();
    // Redrawn at most every 100 ms, erased before the final line.
    assert.ok(term.length >= 29 && term.length <= 32, String(term.length));
    assert.ok(term.slice(0, -2).every((s) => s.startsWith('\r\x1b[2K  model.safetensors  ') && !s.includes('\n')));
    assert.equal(term.at(-1), '  model.safetensors  3.0 MB in 3.0 s (1.0 MB/s)\n');
  });
});

describe('models from the Hub (a local stand-in)', () => {
  const hub = new HubStandIn();
  const home = tmp('home');
  const work = tmp('work');
  const files = Object.fromEntries(fs.readdirSync(MODEL).map((f) => [f, new Uint8Array(fs.readFileSync(path.join(MODEL, f)))]));
  const weights = files['model.safetensors'];
  const input = path.join(work, 'ids.jsonl');
  let commit = '';
  let localScores = '';
  const storage = path.join(home, 'hub', 'models--wgt-test--household-micro');
  const env = () => ({ HF_ENDPOINT: hub.url, HF_HOME: home });

  before(async () => {
    await hub.start();
    commit = hub.publish(ID, { ...files, '.gitattributes': '*.safetensors filter=lfs diff=lfs merge=lfs -text\n', 'pytorch_model.bin': new Uint8Array(64) });
    fs.writeFileSync(input, `${JSON.stringify({ token_ids: [3, 7, 11, 5, 2] })}\n`);
    const local = spawnSync(process.execPath, [CLI, 'score', '--model', MODEL, '--input', input], { encoding: 'utf8' });
    assert.equal(local.status, 0, local.stderr);
    localScores = local.stdout;
  });
  after(async () => {
    await hub.close();
    for (const d of [home, work]) fs.rmSync(d, { recursive: true, force: true });
  });

  test('score: a Hub id downloads into the cache layout, the file whose connection is cut resumed by a Range request', slow, async () => {
    hub.cutNextDownload(ID, 'model.safetensors');
    const r = await cli(['score', '--model', ID, '--input', input], env());
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, localScores);
    // The layout huggingface_hub writes: refs/main, snapshots/<commit>/<file> -> ../../blobs/<etag>.
    assert.equal(fs.readFileSync(path.join(storage, 'refs', 'main'), 'utf8'), commit);
    const snapshot = path.join(storage, 'snapshots', commit);
    assert.deepEqual(fs.readdirSync(snapshot).sort(), Object.keys(files).filter(wantedFile).sort());
    assert.equal(fs.readlinkSync(path.join(snapshot, 'model.safetensors')), `../../blobs/${sha256(weights)}`);
    assert.equal(fs.readlinkSync(path.join(snapshot, 'config.json')), `../../blobs/${gitOid(files['config.json'])}`);
    assert.deepEqual(new Uint8Array(fs.readFileSync(path.join(snapshot, 'model.safetensors'))), weights);
    assert.deepEqual(fs.readdirSync(path.join(storage, 'blobs')).filter((b) => b.endsWith('.incomplete')), []);
    // The cut download, then the rest of it asked for from where it stopped.
    const cdn = hub.requests.filter((q) => q.url.startsWith(`/lfs-cdn/${sha256(weights)}`));
    assert.equal(cdn.length, 2);
    assert.equal(cdn[0].range, null);
    const from = Number(/^bytes=(\d+)-$/.exec(cdn[1].range ?? '')?.[1]);
    assert.ok(from > 0 && from < weights.length, cdn[1].range ?? 'no range');
    assert.match(r.err, /model\.safetensors: connection lost at .* of 291\.2 kB/);
    assert.match(r.err, /model\.safetensors: resuming at .* of 291\.2 kB/);
    // A line per file in a pipe; nothing the trainer does not read.
    assert.doesNotMatch(r.err, /\r/);
    for (const f of Object.keys(files).filter(wantedFile)) assert.equal(r.err.split('\n').filter((l) => l.startsWith(`  ${f}  `)).length, 1, f);
    assert.ok(!hub.requests.some((q) => /README|gitattributes|pytorch_model/.test(q.url)));
  });

  test('train, eval and serve take the Hub id too, from the cache, and the run records the snapshot it trained', slow, async () => {
    const before = hub.requests.length;
    const runs = path.join(work, 'runs');
    const t = await cli(['train', path.join(ROOT, 'examples', 'smoke.yaml'), `model.path=${ID}`, `output.dir=${runs}`, 'output.runName=from-hub'], env());
    assert.equal(t.code, 0, t.err);
    assert.match(t.err, new RegExp(`${ID}: .*snapshots/${commit} \\(in the cache\\)`));
    const recorded = JSON.parse(fs.readFileSync(path.join(runs, 'from-hub', 'config.json'), 'utf8')) as { model: { path: string } };
    assert.equal(recorded.model.path, path.join(storage, 'snapshots', commit));
    const e = await cli(['eval', ID, '--seeds', '1', '--tasks', '1', '--max-turns', '1', '--max-response-tokens', '8', '--progress', 'none'], env());
    assert.equal(e.code, 0, e.err);
    assert.match(e.out, /success \(mean ± std over 1 sampling seeds\)/);
    // Nothing downloaded again: the model's info and its tree, per command.
    assert.deepEqual(hub.requests.slice(before).map((q) => q.url.split('?')[0].replace(commit, 'COMMIT')), [
      `/api/models/${ID}/revision/main`, `/api/models/${ID}/tree/COMMIT`,
      `/api/models/${ID}/revision/main`, `/api/models/${ID}/tree/COMMIT`,
    ]);
    const { child, url: listening } = startServe([ID, '--port', '0'], hfEnv(env()));
    try {
      const url = await listening;
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
      assert.equal(models.data[0].id, ID);
    } finally {
      child.kill('SIGTERM');
    }
  });

  test('a partial file a stopped process left is continued from its end; a lock whose process is gone is taken over', slow, async () => {
    const home2 = tmp('home2');
    const saved = Object.fromEntries(HF_VARIABLES.map((k) => [k, process.env[k]]));
    try {
      for (const k of HF_VARIABLES) delete process.env[k];
      Object.assign(process.env, { HF_ENDPOINT: hub.url, HF_HOME: home2 });
      const storage2 = path.join(home2, 'hub', 'models--wgt-test--household-micro');
      const blob = path.join(storage2, 'blobs', sha256(weights));
      fs.mkdirSync(path.dirname(blob), { recursive: true });
      fs.writeFileSync(`${blob}.incomplete`, weights.subarray(0, 100_000));
      const dead = spawnSync(process.execPath, ['-e', 'process.pid'], { encoding: 'utf8' }).pid!;
      const lock = path.join(home2, 'hub', '.locks', 'models--wgt-test--household-micro', `${sha256(weights)}.lock`);
      fs.mkdirSync(path.dirname(lock), { recursive: true });
      fs.writeFileSync(lock, String(dead));
      const lines: string[] = [];
      const n = hub.requests.length;
      const dir = await hubModelDir(ID, { log: (l) => lines.push(l), progress: { write: (s) => lines.push(s) } });
      assert.equal(dir, path.join(storage2, 'snapshots', commit));
      assert.deepEqual(new Uint8Array(fs.readFileSync(path.join(dir, 'model.safetensors'))), weights);
      const ranges = hub.requests.slice(n).filter((q) => q.url.startsWith('/lfs-cdn/')).map((q) => q.range);
      assert.deepEqual(ranges, ['bytes=100000-']);
      assert.ok(lines.some((l) => l.includes('model.safetensors: resuming at 100.0 kB of 291.2 kB')), lines.join(''));
      assert.ok(!fs.existsSync(lock));
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      fs.rmSync(home2, { recursive: true, force: true });
    }
  });

  test('HF_HUB_OFFLINE: the cache alone, and a clear error when the model is not in it', slow, async () => {
    const n = hub.requests.length;
    const r = await cli(['score', '--model', ID, '--input', input], { ...env(), HF_HUB_OFFLINE: '1' });
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, localScores);
    assert.equal(hub.requests.length, n, 'no request offline');
    const empty = tmp('empty');
    try {
      const miss = await cli(['score', '--model', ID, '--input', input], { HF_ENDPOINT: hub.url, HF_HOME: empty, HF_HUB_OFFLINE: 'true' });
      assert.equal(miss.code, 1);
      assert.equal(miss.err.trim(), `error: ${ID}: HF_HUB_OFFLINE is set and the model is not in the Hugging Face cache (${path.join(empty, 'hub', 'models--wgt-test--household-micro')}); download it once with HF_HUB_OFFLINE unset, or name a local directory`);
      assert.equal(hub.requests.length, n);
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  test('a repository that does not exist, or is private, is named as such; a Hub out of reach falls back to the cache', slow, async () => {
    hub.publish('wgt-test/private', files, { private: true });
    for (const id of ['wgt-test/no-such-model', 'wgt-test/private']) {
      const r = await cli(['score', '--model', id, '--input', input], env());
      assert.equal(r.code, 1);
      assert.equal(r.err.trim(), `error: ${id}: no such model on the Hub at ${hub.url}, or it is private or gated and needs a token (HF_TOKEN)`);
      const answer = hub.requests.findLast((q) => q.url.startsWith(`/api/models/${id}/`))!;
      assert.deepEqual([answer.status, answer.errorCode], [401, 'RepoNotFound']);
    }
    const withToken = await cli(['score', '--model', 'wgt-test/no-such-model', '--input', input], { ...env(), HF_TOKEN: hub.token });
    assert.match(withToken.err, /no such model on the Hub at .* \(or the token in HF_TOKEN may not read it\)/);
    assert.equal(hub.requests.at(-1)!.status, 404);
    const privateRead = await cli(['score', '--model', 'wgt-test/private', '--input', input], { ...env(), HF_TOKEN: hub.token });
    assert.equal(privateRead.code, 0, privateRead.err);
    const badToken = await cli(['score', '--model', ID, '--input', input], { ...env(), HF_TOKEN: 'hf_wrong' });
    assert.equal(badToken.code, 1);
    assert.match(badToken.err, /the Hub refused the token \(401: Invalid credentials in Authorization header\); check HF_TOKEN/);
    const down = { HF_ENDPOINT: 'http://127.0.0.1:9', HF_HOME: home };
    const cached = await cli(['score', '--model', ID, '--input', input], down);
    assert.equal(cached.code, 0, cached.err);
    assert.match(cached.err, new RegExp(`${ID}: cannot reach the Hub at http://127.0.0.1:9 \\(.*\\); using the cached snapshot .*snapshots/${commit}`));
    const nothing = await cli(['score', '--model', ID, '--input', input], { ...down, HF_HOME: path.join(work, 'no-cache') });
    assert.equal(nothing.code, 1);
    assert.match(nothing.err, /cannot reach the Hub at http:\/\/127\.0\.0\.1:9 \(.*\); set HF_ENDPOINT for a mirror, or HF_HUB_OFFLINE=1 to use only the cache/);
  });

  test('export --push uploads a checkpoint as one commit (weights through LFS), which downloads back as a model', slow, async () => {
    const checkpoint = path.join(work, 'runs', 'from-hub', 'checkpoints', 'ckpt-1');
    assert.ok(fs.existsSync(checkpoint), 'the train test made it');
    const noToken = await cli(['export', checkpoint, '--push', 'wgt-user/pushed'], env());
    assert.equal(noToken.code, 1);
    assert.match(noToken.err, /--push wgt-user\/pushed: no Hugging Face token; set HF_TOKEN .* or log in with `hf auth login` \(which writes .*token\)/);
    // A Hub that cannot be reached: an upload has no cache to fall back on, so the offline switch is no way round.
    const offline = await cli(['export', checkpoint, '--push', 'wgt-user/pushed'], { ...env(), HF_ENDPOINT: 'http://127.0.0.1:9', HF_TOKEN: hub.token });
    assert.equal(offline.code, 1);
    assert.match(offline.err, /wgt-user\/pushed: creating the repository: cannot reach the Hub at http:\/\/127\.0\.0\.1:9 \(.*\); an upload needs the Hub itself: check the network, or set HF_ENDPOINT to a Hub that takes uploads/);
    assert.doesNotMatch(offline.err, /HF_HUB_OFFLINE/);
    const local = path.join(work, 'exported');
    const r = await cli(['export', checkpoint, '--out', local, '--push', 'wgt-user/pushed'], { ...env(), HF_TOKEN: hub.token });
    assert.equal(r.code, 0, r.err);
    const pushed = hub.files('wgt-user/pushed')!;
    // Every file of the export but its record of what it wrote.
    assert.deepEqual([...pushed.keys()].sort(), fs.readdirSync(local).filter((f) => f !== '.wgt-export.json').sort());
    for (const [f, bytes] of pushed) assert.deepEqual(bytes, new Uint8Array(fs.readFileSync(path.join(local, f))), f);
    const routes = hub.requests.filter((q) => q.method !== 'GET').map((q) => `${q.method} ${q.url.replace(/[0-9a-f]{64}/, 'OID')}`);
    assert.deepEqual(routes.slice(-5), [
      'POST /api/repos/create', 'POST /api/models/wgt-user/pushed/preupload/main', 'POST /wgt-user/pushed.git/info/lfs/objects/batch', 'PUT /lfs-upload/OID', 'POST /api/models/wgt-user/pushed/commit/main',
    ]);
    assert.match(r.out, new RegExp(`pushed to ${hub.url}/wgt-user/pushed: ${hub.url}/wgt-user/pushed/commit/[0-9a-f]{40}`));
    // Again, without --out: the repository exists (409), and the same files make a second commit.
    const again = await cli(['export', checkpoint, '--push', 'wgt-user/pushed'], { ...env(), HF_TOKEN: hub.token });
    assert.equal(again.code, 0, again.err);
    assert.equal(hub.requests.findLast((q) => q.url === '/api/repos/create')!.status, 409);
    const back = await cli(['score', '--model', 'wgt-user/pushed', '--input', input], env());
    assert.equal(back.code, 0, back.err);
    const fromCheckpoint = await cli(['score', '--model', checkpoint, '--input', input], env());
    assert.equal(back.out, fromCheckpoint.out);
  });
});
