// Our `serve` API as the official OpenAI client sees it, over real HTTP on 127.0.0.1:
// completions and chat completions, whole and streamed, with top log-probs, checked
// against the LocalEngine behind the server.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type { Completion, CompletionCreateParamsNonStreaming } from 'openai/resources/completions';
import { loadModel } from '../src/models/load.ts';
import type { Tokenizer } from '../src/tokenizer/tokenizer.ts';
import type { GenerationResult, SamplingParams } from '../src/engines/engine.ts';
import { HttpEngine } from '../src/engines/http_engine.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { startServer, type ServerHandle } from '../src/serve/server.ts';
import { assertClose, gpu } from './support/gpu.ts';
import { tinyTokenizer } from './support/tiny_tokenizer.ts';

const slow = { timeout: 120_000 };
const FIXTURE = new URL('./fixtures/qwen2-tiny/', import.meta.url).pathname;
const KEY = 'openai-test-key';
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'serve-openai-test-'));
const TEMPLATE = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '<|end|>' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}";
const PROMPT = 'the rain in spain';
const MESSAGES = [{ role: 'system' as const, content: 'be brief' }, { role: 'user' as const, content: 'what is the rain' }];

let tok: Tokenizer;
let engine: LocalEngine;
let server: ServerHandle;
let openai: OpenAI;

after(async () => {
  await server?.close();
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

/** The engine's own answer for prompt ids, to hold the server's against. */
async function direct(promptIds: number[], params: Partial<SamplingParams>): Promise<GenerationResult> {
  const [r] = await engine.generate([{ promptIds, params: { maxTokens: 8, temperature: 0, topP: 1, topK: 0, skipSpecialTokens: true, ...params } }]);
  return r;
}

const name = (id: number) => tok.decode([id]);

/** vLLM-only request fields the OpenAI types do not know; the client sends them as given. */
type Extra<T> = T & Record<string, unknown>;

describe('serve with the openai client', () => {
  test('starts a server with a chat-templated tokenizer', slow, async () => {
    await gpu();
    const model = loadModel(FIXTURE, { trainable: false });
    tok = await tinyTokenizer(path.join(tmpRoot, 'tokenizer'), model.config.vocabSize, { chatTemplate: TEMPLATE });
    engine = new LocalEngine(model, { tokenizer: tok, name: 'tiny' });
    server = await startServer(engine, { port: 0, apiKey: KEY });
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const models = await openai.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['tiny']);
  });

  test('completions: text, top log-probs as vLLM lists them (top N plus the sampled token), text offsets', slow, async () => {
    const want = await direct(tok.encode(PROMPT), { logprobs: 3 });
    const c = await openai.completions.create({ model: 'tiny', prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 3 });
    assert.equal(c.object, 'text_completion');
    assert.match(c.id, /^cmpl-/);
    const choice = c.choices[0];
    assert.equal(choice.text, want.text);
    assert.equal(choice.finish_reason, 'length');
    const lp = choice.logprobs!;
    assert.deepEqual(lp.tokens, want.tokenIds.map(name));
    assertClose(lp.token_logprobs!, want.logprobs, { atol: 1e-5 });
    lp.top_logprobs!.forEach((entry, t) => {
      const top = want.topLogprobs![t];
      assert.deepEqual(Object.keys(entry).sort(), [...new Set([...top.map((e) => name(e.id)), lp.tokens![t]])].sort(), `step ${t} names`);
      top.forEach((e) => assertClose([entry[name(e.id)]], [e.logprob], { atol: 1e-5, label: `step ${t} token ${e.id}` }));
    });
    assert.deepEqual(lp.text_offset, lp.tokens!.map((_, t) => lp.tokens!.slice(0, t).join('').length));
    assert.deepEqual(c.usage, { prompt_tokens: tok.encode(PROMPT).length, completion_tokens: 8, total_tokens: tok.encode(PROMPT).length + 8 });

    // Sampled at a temperature, the sampled token is listed even when it is not among the top N.
    const hot = await openai.completions.create({ model: 'tiny', prompt: PROMPT, max_tokens: 8, temperature: 1.5, seed: 3, logprobs: 1 });
    const hotLp = hot.choices[0].logprobs!;
    hotLp.top_logprobs!.forEach((entry, t) => {
      assert.equal(entry[hotLp.tokens![t]], hotLp.token_logprobs![t]);
      assert.ok(Object.keys(entry).length <= 2);
    });
  });

  test('completions stream: chunks add up to the whole answer; usage last; [DONE] ends the events', slow, async () => {
    const body = { model: 'tiny', prompt: PROMPT, max_tokens: 8, temperature: 0.9, seed: 11, logprobs: 2 } satisfies CompletionCreateParamsNonStreaming;
    const whole = await openai.completions.create(body);
    const stream = await openai.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    let text = '';
    const tokens: string[] = [];
    const logprobs: number[] = [];
    const chunks: Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, whole.usage);
    for (const chunk of chunks.slice(0, -1)) {
      assert.equal(chunk.object, 'text_completion');
      assert.equal(chunk.choices.length, 1);
      text += chunk.choices[0].text;
      tokens.push(...chunk.choices[0].logprobs!.tokens!);
      logprobs.push(...chunk.choices[0].logprobs!.token_logprobs!);
    }
    assert.equal(text, whole.choices[0].text);
    assert.deepEqual(tokens, whole.choices[0].logprobs!.tokens);
    assertClose(logprobs, whole.choices[0].logprobs!.token_logprobs!, { atol: 1e-6 });
    assert.equal(chunks.at(-2)!.choices[0].finish_reason, whole.choices[0].finish_reason);
    assert.ok(chunks.slice(0, -2).every((ch) => ch.choices[0].finish_reason === null));
    assert.deepEqual(chunks.map((ch) => ch.id), chunks.map(() => chunks[0].id));

    // The wire format itself: data lines, blank-line separated, [DONE] last.
    const res = await fetch(`${server.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body: JSON.stringify({ ...body, stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
    const events = (await res.text()).split('\n\n');
    assert.equal(events.pop(), '');
    assert.equal(events.pop(), 'data: [DONE]');
    assert.ok(events.every((e) => e.startsWith('data: {')), events.join('|'));
    assert.equal(events.map((e) => JSON.parse(e.slice(6)).choices[0].text).join(''), whole.choices[0].text);
  });

  test('completions stream: stop strings never leak, n choices stream side by side, continuous usage counts up', slow, async () => {
    const greedy = await direct(tok.encode(PROMPT), { maxTokens: 12 });
    const full = greedy.text;
    // A stop string across a token boundary: its first character arrives a token before the rest.
    let stop = '';
    for (let k = 1; k < greedy.tokenIds.length && !stop; k++) {
      const before = tok.decode(greedy.tokenIds.slice(0, k));
      const candidate = tok.decode(greedy.tokenIds.slice(0, k + 1)).slice(before.length - 1, before.length + 1);
      if (before.length > 0 && candidate.length === 2 && full.indexOf(candidate) === before.length - 1) stop = candidate;
    }
    assert.ok(stop, `no stop string across a token boundary in ${JSON.stringify(full)}`);
    const body = { model: 'tiny', prompt: PROMPT, max_tokens: 12, temperature: 0, stop: [stop] } satisfies CompletionCreateParamsNonStreaming;
    for (const include of [false, true]) {
      const extra: Extra<CompletionCreateParamsNonStreaming> = { ...body, include_stop_str_in_output: include };
      const whole = await openai.completions.create(extra);
      assert.equal(whole.choices[0].finish_reason, 'stop');
      let text = '';
      for await (const chunk of await openai.completions.create({ ...extra, stream: true })) text += chunk.choices[0]?.text ?? '';
      assert.equal(text, whole.choices[0].text, `include_stop_str_in_output ${include}`);
      assert.equal(text, full.slice(0, full.indexOf(stop) + (include ? stop.length : 0)));
    }

    const two = { model: 'tiny', prompt: PROMPT, max_tokens: 6, temperature: 1, n: 2, seed: 5 } satisfies CompletionCreateParamsNonStreaming;
    const whole = await openai.completions.create(two);
    const texts = ['', ''];
    const usage: number[] = [];
    for await (const chunk of await openai.completions.create({ ...two, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } } as Extra<typeof two> & { stream: true })) {
      for (const c of chunk.choices) texts[c.index] += c.text;
      usage.push(chunk.usage!.completion_tokens);
    }
    assert.deepEqual(texts, whole.choices.map((c) => c.text));
    assert.ok(usage.every((u, i) => i === 0 || u >= usage[i - 1]), `usage ${usage}`);
    assert.equal(usage.at(-1), whole.usage!.completion_tokens);
  });

  test('chat completions: the tokenizer\'s template renders the prompt; top log-probs per content token', slow, async () => {
    const promptIds = tok.applyChatTemplate(MESSAGES, { tokenize: true, addGenerationPrompt: true });
    const want = await direct(promptIds, { maxTokens: 6, logprobs: 2 });
    const c = await openai.chat.completions.create({ model: 'tiny', messages: MESSAGES, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 });
    assert.equal(c.object, 'chat.completion');
    assert.match(c.id, /^chatcmpl-/);
    const choice = c.choices[0];
    assert.equal(choice.message.role, 'assistant');
    assert.equal(choice.message.content, want.text);
    assert.equal(c.usage!.prompt_tokens, promptIds.length);
    const content = choice.logprobs!.content!;
    assert.deepEqual(content.map((e) => e.token), want.tokenIds.map(name));
    assertClose(content.map((e) => e.logprob), want.logprobs, { atol: 1e-5 });
    content.forEach((e, t) => {
      assert.deepEqual(e.bytes, [...Buffer.from(e.token)]);
      assert.deepEqual(e.top_logprobs.map((x) => x.token), want.topLogprobs![t].map((x) => name(x.id)));
      assertClose(e.top_logprobs.map((x) => x.logprob), want.topLogprobs![t].map((x) => x.logprob), { atol: 1e-5 });
    });
    const plain = await openai.chat.completions.create({ model: 'tiny', messages: MESSAGES, max_completion_tokens: 6, temperature: 0 });
    assert.equal(plain.choices[0].message.content, want.text);
    assert.equal(plain.choices[0].logprobs, null);
  });

  test('chat stream: a role delta first, content deltas that add up, the finish reason, usage, log-probs per chunk', slow, async () => {
    const body = { model: 'tiny', messages: MESSAGES, max_tokens: 7, temperature: 0.8, seed: 9, logprobs: true, top_logprobs: 3 } satisfies ChatCompletionCreateParamsNonStreaming;
    const whole = await openai.chat.completions.create(body);
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of await openai.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } })) chunks.push(chunk);
    assert.equal(chunks[0].object, 'chat.completion.chunk');
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    const usage = chunks.at(-1)!;
    assert.deepEqual(usage.choices, []);
    assert.deepEqual(usage.usage, whole.usage);
    const body_ = chunks.slice(1, -1);
    assert.equal(body_.map((ch) => ch.choices[0].delta.content ?? '').join(''), whole.choices[0].message.content);
    assert.equal(body_.at(-1)!.choices[0].finish_reason, whole.choices[0].finish_reason);
    const streamed = body_.flatMap((ch) => ch.choices[0].logprobs!.content!);
    const content = whole.choices[0].logprobs!.content!;
    assert.deepEqual(streamed.map((e) => e.token), content.map((e) => e.token));
    assert.deepEqual(streamed.map((e) => e.top_logprobs.map((x) => x.token)), content.map((e) => e.top_logprobs.map((x) => x.token)));
  });

  test('errors arrive as the client\'s typed errors; HttpEngine reads top log-probs from our server', slow, async () => {
    await assert.rejects(openai.completions.create({ model: 'gpt-4', prompt: PROMPT }), (e: unknown) =>
      e instanceof OpenAI.NotFoundError && /the model "gpt-4" does not exist/.test(e.message));
    await assert.rejects(openai.chat.completions.create({ model: 'tiny', messages: MESSAGES, top_logprobs: 2 }), (e: unknown) =>
      e instanceof OpenAI.BadRequestError && /"top_logprobs" needs "logprobs": true/.test(e.message));
    await assert.rejects(openai.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), (e: unknown) =>
      e instanceof OpenAI.BadRequestError && /only \{"type": "text", "text": string\} parts/.test(e.message));
    await assert.rejects(openai.chat.completions.create({ model: 'tiny', messages: MESSAGES, tools: [{ type: 'function', function: { name: 'f' } }] }), (e: unknown) =>
      e instanceof OpenAI.BadRequestError && /"tools" is not supported/.test(e.message));
    await assert.rejects(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list(), (e: unknown) => e instanceof OpenAI.AuthenticationError);

    const ids = tok.encode(PROMPT);
    const params: SamplingParams = { maxTokens: 5, temperature: 0.7, topP: 1, topK: 0, seed: 21, logprobs: 4 };
    const [remote] = await new HttpEngine({ baseUrl: server.url, model: 'tiny', apiKey: KEY }).generate([{ promptIds: ids, params }]);
    const [local] = await engine.generate([{ promptIds: ids, params }]);
    assert.deepEqual(remote.tokenIds, local.tokenIds);
    assert.deepEqual(remote.topLogprobs!.map((s) => s.map((e) => e.id)), local.topLogprobs!.map((s) => s.map((e) => e.id)));
    assertClose(remote.topLogprobs!.flat().map((e) => e.logprob), local.topLogprobs!.flat().map((e) => e.logprob), { atol: 1e-5 });
  });
});
