// The serve command's HTTP API and the HTTP engine client, over real sockets: a
// LocalEngine behind startServer on a free port, HttpEngine (and plain fetch) in front.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { greedyGenerate } from '../src/scoring/generate.ts';
import { loadModel, randomModel, saveModel } from '../src/models/load.ts';
import { loadLora } from '../src/lora/lora.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import type { Tokenizer } from '../src/tokenizer/tokenizer.ts';
import type { GenerationRequest, SamplingParams } from '../src/engines/engine.ts';
import { HttpEngine } from '../src/engines/http_engine.ts';
import { EngineHttpError } from '../src/net/http_call.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { startServer, type ServerHandle } from '../src/serve/server.ts';
import { assertClose, gpu } from './support/gpu.ts';
import { writeRandomAdapter } from './support/random_adapter.ts';
import { tinyTokenizer } from './support/tiny_tokenizer.ts';
import { startServe } from './support/cli_process.ts';

// The software GPU is slow and shared: GPU tests get more than the runner's 5 s default.
const slow = { timeout: 120_000 };

const FIXTURE = new URL('./fixtures/qwen2-tiny/', import.meta.url).pathname;
const KEY = 'test-key';
const tmpRoot = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'serve-test-')));

const GREEDY: SamplingParams = { maxTokens: 10, temperature: 0, topP: 1, topK: 0 };
const req = (promptIds: number[], params: Partial<SamplingParams> = {}): GenerationRequest => ({ promptIds, params: { ...GREEDY, ...params } });

let model: QwenModel;
let tok: Tokenizer;
let engine: LocalEngine;
let server: ServerHandle;
let client: HttpEngine;
let prompt: number[];
let want: number[];

async function post(url: string, body: unknown, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // plain-text answers (adapter loading) stay text
  }
  return { status: res.status, body: parsed };
}



after(async () => {
  await server?.close();
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

describe('serve over HTTP', () => {
  // Set up in a test rather than a hook: the runner holds hooks to 5 s, and the software GPU can take longer.
  test('starts a server over a LocalEngine on a free port', slow, async () => {
    await gpu();
    model = loadModel(FIXTURE, { trainable: false });
    tok = await tinyTokenizer(path.join(tmpRoot, 'tokenizer'), model.config.vocabSize);
    engine = new LocalEngine(model, { tokenizer: tok, name: 'tiny' });
    server = await startServer(engine, { port: 0, apiKey: KEY, allowedRoot: tmpRoot, maxBodyBytes: 64 * 1024 });
    client = new HttpEngine({ baseUrl: `${server.url}/v1`, model: 'tiny', apiKey: KEY });
    const expected = SafetensorsFile.open(`${FIXTURE}expected.safetensors`);
    prompt = [...expected.readInt32('greedy.prompt')];
    want = [...expected.readInt32('greedy.output')].slice(prompt.length);
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  });

  test('greedy generation equals the fixture continuation, in vLLM\'s response shape', slow, async () => {
    const [r] = await client.generate([req(prompt)]);
    assert.deepEqual(r.tokenIds, want);
    assert.equal(r.finishReason, 'length');
    assert.equal(r.text, tok.decode(want));
    const raw = await post(`${server.url}/v1/completions`, {
      model: 'tiny', prompt, max_tokens: 4, temperature: 0, logprobs: 0, return_token_ids: true, return_tokens_as_token_ids: true,
    });
    assert.equal(raw.status, 200);
    const c = raw.body.choices[0];
    assert.equal(raw.body.object, 'text_completion');
    assert.equal(raw.body.model, 'tiny');
    assert.deepEqual(c.token_ids, want.slice(0, 4));
    assert.deepEqual(c.prompt_token_ids, prompt);
    assert.deepEqual(c.logprobs.tokens, want.slice(0, 4).map((id) => `token_id:${id}`));
    assertClose(c.logprobs.token_logprobs, r.logprobs.slice(0, 4), { atol: 1e-5 });
    assert.equal(c.finish_reason, 'length');
    assert.equal(c.prompt_logprobs, null);
    assert.deepEqual(raw.body.usage, { prompt_tokens: prompt.length, completion_tokens: 4, total_tokens: prompt.length + 4 });
  });

  test('HttpEngine returns the LocalEngine\'s samples for the same seeds; concurrent requests share batches', slow, async () => {
    const params = { maxTokens: 8, temperature: 0.9, topK: 30, topP: 0.9 };
    const requests = [11, 12, 13, 14].map((seed, i) => req(i % 2 ? prompt : prompt.slice(2), { ...params, seed }));
    const local = await engine.generate(requests);
    const before = server.stats();
    const remote = await client.generate(requests);
    const after = server.stats();
    remote.forEach((r, i) => {
      assert.deepEqual(r.tokenIds, local[i].tokenIds, `request ${i}`);
      assertClose(r.logprobs, local[i].logprobs, { atol: 1e-4, label: `request ${i} log-probs` });
      assert.equal(r.text, local[i].text);
    });
    assert.equal(after.requests - before.requests, 4);
    assert.ok(after.batches - before.batches < 4, `4 concurrent requests ran in ${after.batches - before.batches} batches`);
  });

  test('scoring through prompt_logprobs matches LocalEngine.score; greedy tokens rank 1; echo gives prompt log-probs', slow, async () => {
    const requests = [{ promptIds: prompt, completionIds: want }, { promptIds: prompt.slice(0, 2), completionIds: [5, 9, 300] }, { promptIds: [7], completionIds: [] }];
    const local = await engine.score(requests);
    const remote = await client.score(requests);
    remote.forEach((r, i) => assertClose(r, local[i], { atol: 1e-4, label: `score ${i}` }));
    const hot = await client.score(requests.slice(0, 1), { temperature: 0.7 });
    assertClose(hot[0], (await engine.score(requests.slice(0, 1), { temperature: 0.7 }))[0], { atol: 1e-4, label: 'score at T 0.7' });

    const raw = await post(`${server.url}/v1/completions`, { prompt: [...prompt, ...want], max_tokens: 1, prompt_logprobs: 0, temperature: 0 });
    const entries = raw.body.choices[0].prompt_logprobs;
    assert.equal(entries[0], null);
    assert.equal(entries.length, prompt.length + want.length);
    want.forEach((id, k) => {
      const e = entries[prompt.length + k][String(id)];
      assert.equal(e.rank, 1, `greedy token ${k} should be the most likely`);
      assert.equal(e.decoded_token, tok.decode([id]));
      assertClose([e.logprob], [local[0][k]], { atol: 1e-4 });
    });
    const echo = await post(`${server.url}/v1/completions`, { prompt: [...prompt, ...want], max_tokens: 0, echo: true, logprobs: 0 });
    const ec = echo.body.choices[0];
    assert.equal(ec.logprobs.token_logprobs[0], null);
    assertClose(ec.logprobs.token_logprobs.slice(prompt.length), local[0], { atol: 1e-4 });
    assert.equal(ec.prompt_logprobs.length, prompt.length + want.length);
    assert.equal(ec.text, tok.decode([...prompt, ...want]));

    // echo with logprobs N, as vLLM answers it: the prompt positions carry their top N too (and prompt_logprobs with them).
    const top = await post(`${server.url}/v1/completions`, { prompt: [...prompt, ...want], max_tokens: 0, echo: true, logprobs: 2 });
    assert.equal(top.status, 200, JSON.stringify(top.body));
    const tc = top.body.choices[0];
    assert.equal(tc.logprobs.top_logprobs[0], null);
    want.forEach((id, k) => {
      const at = prompt.length + k;
      const entry = tc.logprobs.top_logprobs[at];
      // The greedy continuation is its position's most likely token: the token itself and one more.
      assert.deepEqual(Object.keys(entry).length, 2, JSON.stringify(entry));
      assertClose([entry[tok.decode([id])]], [local[0][k]], { atol: 1e-4 });
      const ranked = tc.prompt_logprobs[at] as Record<string, { rank: number; logprob: number }>;
      assert.deepEqual(Object.values(ranked).map((e) => e.rank).sort(), [1, 2]);
      assert.equal(ranked[String(id)].rank, 1);
    });
    // A prompt position's top list is the one generation reports for the same prefix.
    const next = await post(`${server.url}/v1/completions`, { prompt, max_tokens: 1, temperature: 0, logprobs: 2 });
    const generated = next.body.choices[0].logprobs.top_logprobs[0];
    const echoed = tc.logprobs.top_logprobs[prompt.length];
    assert.deepEqual(Object.keys(echoed).sort(), Object.keys(generated).sort());
    for (const name of Object.keys(generated)) assertClose([echoed[name]], [generated[name]], { atol: 1e-4, label: name });
  });

  test('text prompts, stop strings, n with a seed, tokenize and detokenize', slow, async () => {
    const text = tok.decode(prompt);
    const tokenized = await post(`${server.url}/tokenize`, { prompt: 'the rain' });
    assert.deepEqual(tokenized.body.tokens, tok.encode('the rain'));
    assert.equal(tokenized.body.count, tokenized.body.tokens.length);
    const detok = await post(`${server.url}/detokenize`, { tokens: prompt });
    assert.equal(detok.body.prompt, text);

    const full = tok.decode(want);
    const stop = full.slice(3, 5);
    const end = full.indexOf(stop) + stop.length;
    const base = { model: 'tiny', prompt, max_tokens: 10, temperature: 0, stop: [stop], return_token_ids: true };
    const kept = await post(`${server.url}/v1/completions`, { ...base, include_stop_str_in_output: true });
    assert.equal(kept.body.choices[0].text, full.slice(0, end));
    assert.equal(kept.body.choices[0].finish_reason, 'stop');
    assert.equal(kept.body.choices[0].stop_reason, stop);
    const dropped = await post(`${server.url}/v1/completions`, base);
    assert.equal(dropped.body.choices[0].text, full.slice(0, end - stop.length));
    assert.deepEqual(dropped.body.choices[0].token_ids, kept.body.choices[0].token_ids);

    const asText = await post(`${server.url}/v1/completions`, { prompt: [text, prompt], max_tokens: 3, temperature: 0, return_token_ids: true });
    assert.equal(asText.body.choices.length, 2);
    assert.deepEqual(asText.body.choices[1].token_ids, want.slice(0, 3));

    const dflt = await post(`${server.url}/v1/completions`, { prompt, temperature: 0, ignore_eos: true, return_token_ids: true });
    assert.equal(dflt.body.choices[0].token_ids.length, 16, 'max_tokens defaults to 16 as in vLLM');
    const two = await post(`${server.url}/v1/completions`, { prompt, n: 2, seed: 77, max_tokens: 6, temperature: 1, return_token_ids: true });
    assert.deepEqual(two.body.choices.map((c: { index: number }) => c.index), [0, 1]);
    const [seeded] = await client.generate([req(prompt, { maxTokens: 6, temperature: 1, seed: 77 })]);
    assert.deepEqual(two.body.choices[0].token_ids, seeded.tokenIds);
  });

  test('LoRA adapters: load, list, generate by name, unload', slow, async () => {
    const dir = path.join(tmpRoot, 'adapters', 'step-1');
    await writeRandomAdapter(model, dir, 60);
    await client.loadLoraAdapter('policy-step-1', dir);
    assert.deepEqual(await client.models(), ['tiny', 'policy-step-1']);
    const [viaName] = await client.generate([req(prompt)], { model: 'policy-step-1' });
    const reference = loadModel(FIXTURE, { trainable: false });
    loadLora(reference, dir);
    assert.deepEqual(viaName.tokenIds, [...(await greedyGenerate(reference, Int32Array.from(prompt), 10))].slice(prompt.length));
    assert.notDeepEqual(viaName.tokenIds, want);
    const [base] = await client.generate([req(prompt)]);
    assert.deepEqual(base.tokenIds, want);
    await assert.rejects(client.loadLoraAdapter('policy-step-1', dir), (e: EngineHttpError) => e.status === 400 && /already been loaded/.test(e.message));
    await client.unloadLoraAdapter('policy-step-1');
    await assert.rejects(client.generate([req(prompt)], { model: 'policy-step-1' }), (e: EngineHttpError) =>
      e.status === 404 && e.message.includes(`${server.url}/v1/completions`) && /"policy-step-1" does not exist/.test(e.message));
    for (const t of reference.parameters()) t.dispose();
  });

  test('reload_weights through collective_rpc swaps the checkpoint, or reloads the last one; paths outside the allowed root are refused', slow, async () => {
    const rpc = (body: unknown) => post(`${server.url}/collective_rpc`, body);
    const unknown = await rpc({ method: 'reload_weights' });
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.error.message, /does not know where its weights came from/);
    const otherDir = path.join(tmpRoot, 'other');
    const other = randomModel(model.config, 3, { std: 0.2, trainable: false });
    await saveModel(other, otherDir);
    const otherGreedy = [...(await greedyGenerate(other, Int32Array.from(prompt), 6))].slice(prompt.length);
    await client.reloadWeights(otherDir);
    const [r] = await client.generate([req(prompt, { maxTokens: 6 })]);
    assert.deepEqual(r.tokenIds, otherGreedy);
    await assert.rejects(client.reloadWeights(FIXTURE), (e: EngineHttpError) => e.status === 403 && /outside the allowed root/.test(e.message));
    fs.symlinkSync(path.resolve(FIXTURE), path.join(tmpRoot, 'link'));
    await assert.rejects(client.reloadWeights(path.join(tmpRoot, 'link')), (e: EngineHttpError) => e.status === 403 && /resolves to .* outside the allowed root/.test(e.message));
    const copy = path.join(tmpRoot, 'fixture-copy');
    fs.cpSync(FIXTURE, copy, { recursive: true });
    await client.reloadWeights(copy);
    const [back] = await client.generate([req(prompt)]);
    assert.deepEqual(back.tokenIds, want);
    // Without weights_path the workers read the last path again, as vLLM's do.
    fs.cpSync(otherDir, copy, { recursive: true });
    const again = await rpc({ method: 'reload_weights', kwargs: {} });
    assert.deepEqual([again.status, again.body], [200, { results: [null] }]);
    const [r2] = await client.generate([req(prompt, { maxTokens: 6 })]);
    assert.deepEqual(r2.tokenIds, otherGreedy);
    assert.equal((await post(`${server.url}/reset_prefix_cache`, undefined)).status, 200);
    fs.cpSync(FIXTURE, copy, { recursive: true });
    await client.reloadWeights(copy);
    for (const t of other.parameters()) t.dispose();
  });

  test('bad requests get 4xx with a message, and the server keeps serving', slow, async () => {
    const url = `${server.url}/v1/completions`;
    const expectError = async (p: Promise<{ status: number; body: any }>, status: number, re: RegExp) => {
      const r = await p;
      assert.equal(r.status, status, JSON.stringify(r.body));
      assert.equal(r.body.error.code, status);
      assert.equal(typeof r.body.error.type, 'string');
      assert.match(r.body.error.message, re);
    };
    await expectError(post(url, '{"prompt": [1, 2'), 400, /malformed JSON/);
    await expectError(post(url, '[1, 2]'), 400, /must be a JSON object/);
    await expectError(post(url, { prompt: [1, 2, 320] }), 400, /prompt\[2\] = 320 is not a token id in \[0, 320\)/);
    await expectError(post(url, { prompt: [[1], [2, -1]] }), 400, /prompt\[1\]\[1\] = -1/);
    await expectError(post(url, { prompt: [1, 2], temperature: 'hot' }), 400, /field "temperature" must be a number >= 0, got "hot"/);
    await expectError(post(url, { prompt: [1, 2], max_tokens: 1.5 }), 400, /field "max_tokens" must be an integer/);
    await expectError(post(url, { prompt: [1, 2], top_p: 0 }), 400, /top_p/);
    await expectError(post(url, { prompt: [1, 2], max_tokens: 1000 }), 400, /context of 256 tokens/);
    await expectError(post(url, { prompt: [1, 2], stream: true, prompt_logprobs: 0 }), 400, /"prompt_logprobs" is not available when streaming/);
    await expectError(post(url, { prompt: [1, 2], stream_options: { include_usage: true } }), 400, /only allowed with "stream": true/);
    await expectError(post(url, { prompt: [1, 2], logprobs: 21 }), 400, /"logprobs" is 21, more than the 20 top log-probs/);
    await expectError(post(url, { prompt: [1, 2], prompt_logprobs: 21 }), 400, /"prompt_logprobs" is 21, more than the 20 top log-probs/);
    await expectError(post(url, { prompt: [1, 2], presence_penalty: 0.5 }), 400, /presence_penalty" is not supported/);
    await expectError(post(url, { prompt: [] }), 400, /field "prompt"/);
    await expectError(post(url, { prompt: [1, 2], model: 'gpt-4' }), 404, /the model "gpt-4" does not exist/);
    await expectError(post(url, { prompt: [1, 2], stop_token_ids: 'x' }), 400, /stop_token_ids/);
    await expectError(post(`${server.url}/v1/load_lora_adapter`, { lora_name: 'x', lora_path: '/etc' }), 403, /outside the allowed root/);
    await expectError(post(`${server.url}/v1/load_lora_adapter`, { lora_name: 'x', lora_path: path.join(tmpRoot, 'missing') }), 400, /no such directory/);
    await expectError(post(`${server.url}/v1/load_lora_adapter`, { lora_name: 'x', lora_path: path.join(tmpRoot, 'tokenizer') }), 400, /adapter_config\.json/);
    await expectError(post(`${server.url}/v1/load_lora_adapter`, { lora_path: tmpRoot }), 400, /"lora_name" is required/);
    await expectError(post(`${server.url}/v1/unload_lora_adapter`, { lora_name: 'never' }), 404, /cannot be found/);
    const rpc = `${server.url}/collective_rpc`;
    await expectError(post(rpc, { method: 'reload_weights', kwargs: { weights_path: path.join(tmpRoot, 'tokenizer') } }), 400, /config\.json not found/);
    await expectError(post(rpc, { method: 'sleep' }), 400, /method "sleep" is not supported by this server/);
    await expectError(post(rpc, { method: 'reload_weights', kwargs: { weights_path: tmpRoot, strict: true } }), 400, /unsupported kwargs "strict"/);
    await expectError(post(rpc, { kwargs: {} }), 400, /"method" is required/);
    await expectError(post(url, { prompt: [1, 2] }, {}), 401, /API key/);
    await expectError(post(url, { prompt: [1, 2] }, { authorization: 'Bearer wrong' }), 401, /API key/);
    await expectError(post(url, { prompt: Array(40000).fill(1) }), 413, /larger than 65536 bytes/);
    await expectError(post(`${server.url}/v1/nothing`, {}), 404, /no route/);
    const get = await fetch(url, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(get.status, 405);
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    const [r] = await client.generate([req(prompt, { maxTokens: 3 })]);
    assert.deepEqual(r.tokenIds, want.slice(0, 3));
  });
});

// A stand-in server for the client's failure handling: answers per a script.
async function scriptedServer(answer: (n: number, req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let n = 0;
  const s: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(++n, req, res));
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    hits: () => n,
    close: () => new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    }),
  };
}

const completion = (choice: Record<string, unknown>) => JSON.stringify({ choices: [{ index: 0, text: '', finish_reason: 'length', ...choice }] });

describe('HttpEngine failure handling', () => {
  const fast = { model: 'm', backoffMs: 5, maxBackoffMs: 20 };

  test('retries 5xx with backoff, then succeeds; gives up after the retry budget naming the URL', slow, async () => {
    const s = await scriptedServer((n, _req, res) => {
      if (n <= 2) {
        res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'warming up' } }));
      } else {
        res.writeHead(200, { 'content-type': 'application/json' }).end(completion({ token_ids: [4, 5], logprobs: { tokens: ['token_id:4', 'token_id:5'], token_logprobs: [-0.5, -1.5] } }));
      }
    });
    const [r] = await new HttpEngine({ ...fast, baseUrl: s.url, retries: 3 }).generate([req([1])]);
    assert.deepEqual(r, { tokenIds: [4, 5], logprobs: [-0.5, -1.5], finishReason: 'length', text: '' });
    assert.equal(s.hits(), 3);
    const before = s.hits();
    const stubborn = await scriptedServer((_n, _req, res) => res.writeHead(500).end('boom'));
    await assert.rejects(new HttpEngine({ ...fast, baseUrl: stubborn.url, retries: 2 }).generate([req([1])]), (e: EngineHttpError) =>
      e.status === 500 && e.message.includes(`${stubborn.url}/v1/completions`) && /answered 500: boom \(gave up after 3 attempts\)/.test(e.message));
    assert.equal(stubborn.hits(), 3);
    assert.equal(s.hits(), before);
    await s.close();
    await stubborn.close();
  });

  test('4xx is not retried; stalls time out; refused connections are retried and named', slow, async () => {
    const s = await scriptedServer((_n, _req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'bad prompt', code: 400 } })));
    await assert.rejects(new HttpEngine({ ...fast, baseUrl: s.url, retries: 3 }).generate([req([1])]), (e: EngineHttpError) => e.status === 400 && /answered 400: bad prompt/.test(e.message));
    assert.equal(s.hits(), 1);
    await s.close();

    const stall = await scriptedServer(() => undefined);
    const t0 = Date.now();
    await assert.rejects(new HttpEngine({ ...fast, baseUrl: stall.url, timeoutMs: 200, retries: 3 }).generate([req([1])]), (e: EngineHttpError) =>
      e.status === null && e.message.includes(stall.url) && /no answer within 200 ms/.test(e.message));
    assert.ok(Date.now() - t0 < 2000);
    assert.equal(stall.hits(), 1);
    await assert.rejects(new HttpEngine({ ...fast, baseUrl: stall.url, timeoutMs: 100, retries: 1, retryTimeouts: true }).health(), /no answer within 100 ms \(gave up after 2 attempts\)/);
    assert.equal(stall.hits(), 3);
    await stall.close();

    const gone = await scriptedServer(() => undefined);
    await gone.close();
    await assert.rejects(new HttpEngine({ ...fast, baseUrl: gone.url, retries: 2 }).generate([req([1])]), (e: EngineHttpError) =>
      e.message.includes(gone.url) && /cannot reach the server .*gave up after 3 attempts/.test(e.message));
  });

  test('full-weight sync sends what a vLLM in dev mode takes: collective_rpc reload_weights, then reset_prefix_cache', slow, async () => {
    const seen: { method: string; url: string; body: string }[] = [];
    const vllmLike: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, body });
        if (req.url === '/collective_rpc') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: [null, null] }));
        else res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => vllmLike.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(vllmLike.address() as AddressInfo).port}`;
    await new HttpEngine({ ...fast, baseUrl: `${url}/v1` }).reloadWeights('/runs/a/sync/weights');
    assert.deepEqual(seen.map((s) => [s.method, s.url]), [['POST', '/collective_rpc'], ['POST', '/reset_prefix_cache']]);
    assert.deepEqual(JSON.parse(seen[0].body), { method: 'reload_weights', kwargs: { weights_path: '/runs/a/sync/weights' } });
    await new Promise<void>((resolve) => {
      vllmLike.close(() => resolve());
      vllmLike.closeAllConnections();
    });

    const plain = await scriptedServer((_n, _req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Not Found' })));
    await assert.rejects(new HttpEngine({ ...fast, baseUrl: plain.url }).reloadWeights('/w'), (e: EngineHttpError) =>
      e.status === 404 && /answered 404: Not Found \(the server has no \/collective_rpc: start vLLM with VLLM_SERVER_DEV_MODE=1/.test(e.message));
    await plain.close();
  });

  test('malformed answers are errors; prompt_logprobs are read by token id, not by position', slow, async () => {
    const s = await scriptedServer((n, _req, res) => {
      const bodies = [
        JSON.stringify({ choices: [] }),
        completion({ logprobs: { tokens: ['token_id:1'], token_logprobs: [-1] } }).replace('"finish_reason":"length"', '"finish_reason":"abort"'),
        completion({ token_ids: [1, 2], logprobs: { token_logprobs: [-1] } }),
        'not json at all',
        completion({ prompt_logprobs: [null, { 99: { logprob: -9, rank: 1 }, 7: { logprob: -0.25, rank: 3 } }, { 8: { logprob: -0.75, rank: 2 } }] }),
        completion({ prompt_logprobs: [null, { 99: { logprob: -9, rank: 1 } }, { 8: { logprob: -0.75, rank: 2 } }] }),
      ];
      res.writeHead(200, { 'content-type': 'application/json' }).end(bodies[n - 1]);
    });
    const c = new HttpEngine({ ...fast, baseUrl: s.url });
    await assert.rejects(c.generate([req([1])]), /malformed answer: expected \{"choices": \[one choice\]\}/);
    await assert.rejects(c.generate([req([1])]), /finish_reason "abort"/);
    await assert.rejects(c.generate([req([1])]), /2 token ids but 1 log-probs/);
    await assert.rejects(c.generate([req([1])]), /expected \{"choices"/);
    assert.deepEqual(await c.score([{ promptIds: [3], completionIds: [7, 8] }]), [[-0.25, -0.75]]);
    await assert.rejects(c.score([{ promptIds: [3], completionIds: [7, 8] }]), /prompt_logprobs\[1\] has no log-prob for token id 7/);
    await s.close();
  });
});

describe('serve command', () => {
  test('starts from the CLI, answers /health and a completion, stops on SIGTERM', slow, async () => {
    const serve = startServe([FIXTURE, '--port', '0', '--served-model-name', 'fixture', '--max-logprobs', '2']);
    const { child } = serve;
    const url = await serve.url;
    try {
      assert.match(serve.output(), /serving fixture \(no tokenizer: token ids only\)/);
      assert.equal((await fetch(`${url}/health`)).status, 200);
      const [r] = await new HttpEngine({ baseUrl: url, model: 'fixture' }).generate([req(prompt, { maxTokens: 4, logprobs: 2 })]);
      assert.deepEqual(r.tokenIds, want.slice(0, 4));
      assert.deepEqual(r.topLogprobs!.map((top) => top[0].id), want.slice(0, 4), 'greedy tokens head their top lists');
      const tooMany = await post(`${url}/v1/completions`, { prompt, logprobs: 3 }, {});
      assert.equal(tooMany.status, 400);
      assert.match(tooMany.body.error.message, /more than the 2 top log-probs/);
    } finally {
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  });
});
