// What serve tells about requests and their roles, as vLLM does: one access-log line per
// request answered, in uvicorn's format (vLLM's HTTP server); chat messages of any role
// go to the chat template, which decides (vLLM's CustomChatCompletionMessageParam takes
// any role): Qwen3.5's template refuses an unknown one, so the request gets a 400 with
// its message, while Qwen2.5's leaves such a message out; a message's text parts reach
// each template as vLLM hands them: Qwen3.5's walks the parts itself (and runs them
// together), Qwen2.5's and Qwen3's read one string, the parts joined by newlines.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadModel } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { parseChat } from '../src/serve/chat.ts';
import { ApiError } from '../src/serve/http.ts';
import { startServer } from '../src/serve/server.ts';
import { gpu } from './support/gpu.ts';
import { familyDir } from './support/qwen_templates.ts';
import { tinyTokenizer } from './support/tiny_tokenizer.ts';

const FIXTURE = new URL('./fixtures/qwen2-tiny/', import.meta.url).pathname;
const slow = { timeout: 600_000 };

describe('serve: requests as vLLM answers and logs them', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-serve-requests-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test('one access-log line per request answered, in uvicorn\'s format', slow, async () => {
    await gpu();
    const model = loadModel(FIXTURE, { trainable: false });
    const tok = await tinyTokenizer(path.join(root, 'tokenizer'), model.config.vocabSize);
    const lines: string[] = [];
    const server = await startServer(new LocalEngine(model, { tokenizer: tok, name: 'tiny' }), { port: 0, accessLog: (l) => lines.push(l) });
    try {
      const post = (route: string, body: string) => fetch(`${server.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal((await post('/v1/completions', JSON.stringify({ prompt: [1, 2, 3], max_tokens: 2 }))).status, 200);
      assert.equal((await post('/v1/completions', '{not json')).status, 400);
      assert.equal((await fetch(`${server.url}/nowhere?x=1`)).status, 404);
      await new Promise((r) => setTimeout(r, 50));
      const client = /^INFO: {5}127\.0\.0\.1:\d+ - /;
      assert.equal(lines.length, 3, lines.join('\n'));
      assert.ok(lines.every((l) => client.test(l)), lines.join('\n'));
      assert.deepEqual(lines.map((l) => l.replace(client, '')), [
        '"POST /v1/completions HTTP/1.1" 200 OK',
        '"POST /v1/completions HTTP/1.1" 400 Bad Request',
        '"GET /nowhere?x=1 HTTP/1.1" 404 Not Found',
      ]);
    } finally {
      await server.close();
      for (const p of model.parameters()) p.dispose();
    }
  });

  test('an unknown chat role goes to the template, which decides', async () => {
    const limits = { vocab: 151_936, maxModelLen: 4096, maxChoices: 4, maxLogprobs: 20 };
    const messages = [{ role: 'user', content: 'hello' }, { role: 'robot', content: 'beep' }];
    const qwen35 = await loadTokenizer(familyDir('qwen3.5', root));
    assert.throws(() => parseChat({ messages }, qwen35, limits),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /the chat template could not render these messages: .*Unexpected message role/.test(e.message));
    const qwen25 = await loadTokenizer(familyDir('qwen2.5', root));
    const rendered = qwen25.decode(parseChat({ messages }, qwen25, limits).promptIds);
    assert.match(rendered, /<\|im_start\|>user\nhello<\|im_end\|>/);
    assert.doesNotMatch(rendered, /beep/, 'Qwen2.5\'s template leaves a message of another role out, under vLLM as here');
  });

  test("text parts reach the template as vLLM hands them: Qwen3.5's as a list, Qwen2.5's and Qwen3's joined by newlines", async () => {
    const limits = { vocab: 151_936, maxModelLen: 4096, maxChoices: 4, maxLogprobs: 20 };
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'line one' }, { type: 'text', text: 'line two' }] }];
    const user = async (family: string) => {
      const tok = await loadTokenizer(familyDir(family, root));
      return /<\|im_start\|>user\n([^]*?)<\|im_end\|>/.exec(tok.decode(parseChat({ messages }, tok, limits).promptIds))![1];
    };
    assert.equal(await user('qwen3.5'), 'line oneline two');
    assert.equal(await user('qwen2.5'), 'line one\nline two');
    assert.equal(await user('qwen3'), 'line one\nline two');
  });
});
