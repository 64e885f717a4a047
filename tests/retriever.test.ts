// BM25; the retrieval server against what Search-R1's and SDAR's FastAPI servers answer
// (every 422 body below is FastAPI 0.142 / pydantic 2.13's own, recorded from their
// request models); the clients of both protocols, their retries and failures; one
// request per rollout round.

import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Bm25Index, tokenize } from '../envs/bm25.ts';
import { startRetrieverServer, type RetrieverServer } from '../envs/retriever_server.ts';
import { builtInSearchData, SearchEnvironment } from '../envs/search/env.ts';
import { HttpRetriever, RetrieverError } from '../envs/search/http_retriever.ts';
import { Bm25Retriever, type RetrievalHit, type Retriever } from '../envs/search/retriever.ts';
import { loadConfig } from '../src/config/config.ts';
import { makeEnvironment } from '../src/envs/environment.ts';
import { listen } from '../src/net/listen.ts';

const corpus = [
  { id: 'd0', contents: '"Velmora"\nVelmora is a city in Quenthia on the Aster river.' },
  { id: 'd1', contents: '"Quenthia"\nQuenthia is a country whose capital is Velmora.' },
  { id: 'd2', contents: '"Aster"\nThe Aster is a river. Rivers of Quenthia include the Aster.' },
  { id: 'd3', contents: '"Bakery"\nA bakery sells bread and cakes.' },
];

async function post(url: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  return { status: res.status, json: text === '' ? null : JSON.parse(text) };
}

describe('bm25', () => {
  test('tokenize: lower case, stop words out, plurals stemmed', () => {
    assert.deepEqual(tokenize('The Phone-Cases, and 3 Batteries!'), ['phone', 'case', '3', 'battery']);
    assert.deepEqual(tokenize('glass dress bus series'), ['glass', 'dress', 'bus', 'sery']);
  });

  test('ranks by term rarity and frequency with length normalisation; ties keep corpus order', () => {
    const index = new Bm25Index(corpus.map((d) => d.contents));
    const hits = index.search('aster river', 4);
    assert.deepEqual(hits.map((h) => h.index), [2, 0]);
    assert.ok(hits[0].score > hits[1].score);
    assert.deepEqual(index.search('quenthia', 4).map((h) => h.index), [1, 0, 2]);
    assert.deepEqual(index.search('zzz', 3), []);
    assert.equal(index.search('velmora', 1).length, 1);
    const tied = new Bm25Index(['alpha beta', 'alpha beta', 'alpha gamma']);
    assert.deepEqual(tied.search('beta', 5).map((h) => h.index), [0, 1]);
  });

  test('scores follow the Lucene BM25 formula', () => {
    const index = new Bm25Index(['cat dog', 'cat', 'bird'], { k1: 1.2, b: 0.75 });
    const [hit] = index.search('dog', 1);
    const idf = Math.log(1 + (3 - 1 + 0.5) / (1 + 0.5));
    const avgdl = 4 / 3;
    assert.ok(Math.abs(hit.score - idf / (1 + 1.2 * (1 - 0.75 + (0.75 * 2) / avgdl))) < 1e-12);
  });
});

describe('retriever server, Search-R1 protocol', () => {
  let server: RetrieverServer;
  const local = new Bm25Retriever(corpus);

  before(async () => {
    server = await startRetrieverServer(local, { maxBodyBytes: 1 << 20, maxTopk: 10 });
  });

  after(async () => {
    await server.close();
  });

  test('binds to 127.0.0.1 on an ephemeral port', () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/retrieve$/);
    assert.ok(server.port > 0);
  });

  test('one list per query, scores on request, bare documents otherwise; topk 0 or null is the default (3)', async () => {
    const r = await post(server.url, JSON.stringify({ queries: ['aster river', 'bread'], topk: 2, return_scores: true }));
    assert.equal(r.status, 200);
    const expected = local.retrieve(['aster river', 'bread'], 2);
    assert.deepEqual(r.json, { result: expected.map((list) => list.map((h) => ({ document: { id: h.document.id, contents: h.document.contents }, score: h.score }))) });
    const bare = await post(server.url, JSON.stringify({ queries: ['quenthia capital'], topk: 1 }));
    assert.deepEqual(bare.json, { result: [[{ id: 'd1', contents: corpus[1].contents }]] });
    for (const topk of [0, null, undefined]) {
      const d = await post(server.url, JSON.stringify({ queries: ['quenthia'], topk }));
      assert.equal((d.json as { result: unknown[][] }).result[0].length, 3, String(topk));
    }
    // pydantic's lax mode: "2" is 2, "yes" is true.
    const lax = await post(server.url, JSON.stringify({ queries: ['quenthia'], topk: '2', return_scores: 'yes' }));
    assert.deepEqual((lax.json as { result: { score: number }[][] }).result[0].map((h) => typeof h.score), ['number', 'number']);
    assert.deepEqual(await post(server.url, '{"queries": []}'), { status: 200, json: { result: [] } });
  });

  test("bad bodies get FastAPI's 422 {\"detail\": [...]}, word for word", async () => {
    const cases: [string, unknown][] = [
      ['{"query": "x"}', [{ type: 'missing', loc: ['body', 'queries'], msg: 'Field required', input: { query: 'x' } }]],
      ['{"queries": "x"}', [{ type: 'list_type', loc: ['body', 'queries'], msg: 'Input should be a valid list', input: 'x' }]],
      ['{"queries": ["a", 1]}', [{ type: 'string_type', loc: ['body', 'queries', 1], msg: 'Input should be a valid string', input: 1 }]],
      ['{"queries": ["a"], "topk": 3.5}', [{ type: 'int_from_float', loc: ['body', 'topk'], msg: 'Input should be a valid integer, got a number with a fractional part', input: 3.5 }]],
      ['{"queries": ["a"], "topk": "x"}', [{ type: 'int_parsing', loc: ['body', 'topk'], msg: 'Input should be a valid integer, unable to parse string as an integer', input: 'x' }]],
      ['{"queries": ["a"], "topk": [3]}', [{ type: 'int_type', loc: ['body', 'topk'], msg: 'Input should be a valid integer', input: [3] }]],
      ['{"queries": ["a"], "return_scores": "maybe"}', [{ type: 'bool_parsing', loc: ['body', 'return_scores'], msg: 'Input should be a valid boolean, unable to interpret input', input: 'maybe' }]],
      ['{"queries": ["a"], "return_scores": null}', [{ type: 'bool_type', loc: ['body', 'return_scores'], msg: 'Input should be a valid boolean', input: null }]],
      ['{"queries": ["a"], "return_scores": 2}', [{ type: 'bool_parsing', loc: ['body', 'return_scores'], msg: 'Input should be a valid boolean, unable to interpret input', input: 2 }]],
      ['[1,2]', [{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: [1, 2] }]],
      ['"str"', [{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: 'str' }]],
      ['', [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]],
      ['null', [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]],
      // Beyond the reference (whose retrievers would crash with a 500): topk within [0, maxTopk].
      ['{"queries": ["a"], "topk": -1}', [{ type: 'greater_than_equal', loc: ['body', 'topk'], msg: 'Input should be greater than or equal to 0', input: -1, ctx: { ge: 0 } }]],
      ['{"queries": ["a"], "topk": 11}', [{ type: 'less_than_equal', loc: ['body', 'topk'], msg: 'Input should be less than or equal to 10', input: 11, ctx: { le: 10 } }]],
    ];
    for (const [body, detail] of cases) assert.deepEqual(await post(server.url, body), { status: 422, json: { detail } }, body);
    const text = await post(server.url, '{"queries": ["a"]}', { 'content-type': 'text/plain' });
    assert.deepEqual(text, { status: 422, json: { detail: [{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: '{"queries": ["a"]}' }] } });
    const broken = await post(server.url, '{"queries": ["a"]');
    assert.equal(broken.status, 422);
    const [err] = (broken.json as { detail: { type: string; loc: unknown[]; msg: string; input: unknown }[] }).detail;
    assert.deepEqual([err.type, err.loc[0], err.msg, err.input], ['json_invalid', 'body', 'JSON decode error', {}]);
    assert.deepEqual(await post(server.url.replace('/retrieve', '/search'), '{}'), { status: 404, json: { detail: 'Not Found' } });
    const get = await fetch(server.url);
    assert.deepEqual([get.status, get.headers.get('allow'), await get.json()], [405, 'POST', { detail: 'Method Not Allowed' }]);
    const health = await fetch(server.url.replace('/retrieve', '/health'));
    assert.deepEqual(await health.json(), { ok: true });
  });

  test("Search-R1's batch sizes: 512 x 5 = 2,560 queries in one request by default; the cap is a flag", async () => {
    const queries = Array.from({ length: 2560 }, (_, i) => `query ${i} aster`);
    const r = await post(server.url, JSON.stringify({ queries, topk: 1 }));
    assert.equal(r.status, 200);
    assert.equal((r.json as { result: unknown[] }).result.length, 2560);
    const capped = await startRetrieverServer(local, { maxQueries: 4 });
    try {
      const over = await post(capped.url, JSON.stringify({ queries: ['a', 'b', 'c', 'd', 'e'] }));
      assert.deepEqual(over, { status: 413, json: { detail: '5 queries in one request; this server takes at most 4 (--max-queries)' } });
    } finally {
      await capped.close();
    }
  });

  test('a chunked body past the size cap is refused while it streams, and the server keeps serving', async () => {
    const small = await startRetrieverServer(local, { maxBodyBytes: 4096 });
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port: small.port, path: '/retrieve', method: 'POST', headers: { 'transfer-encoding': 'chunked', 'content-type': 'application/json' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.write('{"queries": ["');
        for (let i = 0; i < 10; i++) req.write('y'.repeat(1000));
        req.end('"]}');
      });
      assert.equal(status, 413);
      assert.equal((await post(small.url, '{"queries": ["bread"]}')).status, 200);
    } finally {
      await small.close();
    }
  });

  test('a retriever that throws is a 500 "Internal Server Error", as uvicorn answers', async () => {
    const failing = await startRetrieverServer({ retrieve: () => { throw new Error('index offline'); } });
    const logged = console.error;
    console.error = () => {};
    try {
      const res = await fetch(failing.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"queries": ["q"]}' });
      assert.deepEqual([res.status, res.headers.get('content-type'), await res.text()], [500, 'text/plain; charset=utf-8', 'Internal Server Error']);
    } finally {
      console.error = logged;
      await failing.close();
    }
  });
});

describe("retriever server, SDAR's protocol", () => {
  test('{"query"} is answered with one list; {"queries"} is refused as SDAR\'s server refuses it', async () => {
    const local = new Bm25Retriever(corpus);
    const server = await startRetrieverServer(local, { protocol: 'sdar' });
    try {
      const r = await post(server.url, JSON.stringify({ query: 'aster river', topk: 2, return_scores: true }));
      assert.deepEqual(r.json, { result: [local.retrieve(['aster river'], 2)[0].map((h) => ({ document: h.document, score: h.score }))] });
      assert.deepEqual(await post(server.url, '{"queries": ["a"], "topk": "x"}'), {
        status: 422,
        json: { detail: [
          { type: 'missing', loc: ['body', 'query'], msg: 'Field required', input: { queries: ['a'], topk: 'x' } },
          { type: 'int_parsing', loc: ['body', 'topk'], msg: 'Input should be a valid integer, unable to parse string as an integer', input: 'x' },
        ] },
      });
      assert.deepEqual(await post(server.url, '{"query": 5}'), { status: 422, json: { detail: [{ type: 'string_type', loc: ['body', 'query'], msg: 'Input should be a valid string', input: 5 }] } });
    } finally {
      await server.close();
    }
  });
});

/** A server answering /retrieve from a script of answers (status and body; 0 resets the connection, -1 never answers), then from `rest`; it keeps every request's body. */
async function scriptedServer(script: [number, string][], rest: (body: Record<string, unknown>) => [number, string]) {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      bodies.push(body);
      const [status, answer] = script.shift() ?? rest(body);
      if (status === 0) return void res.socket?.destroy();
      // -1: no answer until the client gives up.
      if (status === -1) return void req.socket.once('close', () => res.destroy());
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(answer);
    });
  });
  const { origin } = await listen(server, 0, '127.0.0.1');
  return { url: `${origin}/retrieve`, bodies, close: () => new Promise<void>((done) => { server.close(() => done()); server.closeAllConnections(); }) };
}

const FAST = { timeoutMs: 2000, retries: 3, backoffMs: 1 };

describe('retriever clients', () => {
  let server: RetrieverServer;
  let sdar: RetrieverServer;
  const local = new Bm25Retriever(corpus);

  before(async () => {
    server = await startRetrieverServer(local, { maxTopk: 10 });
    sdar = await startRetrieverServer(local, { protocol: 'sdar' });
  });

  after(async () => {
    await server.close();
    await sdar.close();
  });

  test('both protocols get what the in-process retriever gives', async () => {
    assert.deepEqual(await new HttpRetriever(server.url).retrieve(['velmora', 'cakes'], 3), local.retrieve(['velmora', 'cakes'], 3));
    assert.deepEqual(await new HttpRetriever(sdar.url, { protocol: 'sdar' }).retrieve(['velmora', 'cakes'], 3), local.retrieve(['velmora', 'cakes'], 3));
  });

  test('a server of the other protocol is refused at once (422, never retried), naming the URL and the setting', async () => {
    await assert.rejects(new HttpRetriever(server.url, { protocol: 'sdar' }).check(3), (e: Error) =>
      e instanceof RetrieverError && e.message.includes(`POST ${server.url} answered 422`) && e.message.includes('"loc":["body","queries"]') && e.message.includes('protocol=search-r1'));
    await assert.rejects(new HttpRetriever(sdar.url).check(3), (e: Error) => e.message.includes(`POST ${sdar.url} answered 422`) && e.message.includes('protocol=sdar'));
  });

  test('500, 502, a reset connection and a timeout are retried with backoff, then succeed', async () => {
    const good = JSON.stringify({ result: [[{ document: { id: '1', contents: '"T"\nbody' }, score: 2 }]] });
    const flaky = await scriptedServer([[500, 'Internal Server Error'], [502, '{}'], [0, ''], [-1, '']], () => [200, good]);
    try {
      const retriever = new HttpRetriever(flaky.url, { timeoutMs: 300, retries: 4, backoffMs: 1 });
      assert.deepEqual(await retriever.retrieve(['q'], 3), [[{ document: { id: '1', contents: '"T"\nbody' }, score: 2 }]]);
      assert.equal(flaky.bodies.length, 5);
      assert.deepEqual(flaky.bodies[0], { queries: ['q'], topk: 3, return_scores: true });
    } finally {
      await flaky.close();
    }
  });

  test('a call that keeps failing, or answers what is not a result, fails naming the URL', async () => {
    const down = await scriptedServer([], () => [503, '{"detail": "index loading"}']);
    try {
      await assert.rejects(new HttpRetriever(down.url, FAST).retrieve(['q'], 3), (e: Error) =>
        e instanceof RetrieverError && e.message.includes(`POST ${down.url}: answered 503: index loading (gave up after 4 attempts)`));
      assert.equal(down.bodies.length, 4);
    } finally {
      await down.close();
    }
    const answers: [string, RegExp][] = [
      ['{"result": [[{"document": {"id": "1", "contents": "x"}', /the answer is not JSON: \{"result"/],
      ['{"result": [[], []]}', /expected \{"result": \[\.\.\.\] with one list of hits for each of the 3 queries\}, got \{"result":\[\[\],\[\]\]\}/],
      ['{"results": []}', /expected .* got \{"results":\[\]\}/],
      ['{"result": [[{"id": 1}], [], []]}', /a hit must be .* got \{"id":1\}/],
    ];
    for (const [answer, message] of answers) {
      const odd = await scriptedServer([], () => [200, answer]);
      try {
        await assert.rejects(new HttpRetriever(odd.url, FAST).retrieve(['a', 'b', 'c'], 3), (e: Error) => e.message.startsWith(`retriever POST ${odd.url}: `) && message.test(e.message));
        assert.equal(odd.bodies.length, 1, answer);
      } finally {
        await odd.close();
      }
    }
    const gone = await startRetrieverServer(local);
    const url = gone.url;
    await gone.close();
    await assert.rejects(new HttpRetriever(url, FAST).check(3), (e: Error) => e.message.includes(`POST ${url}: cannot reach the server`) && e.message.includes('gave up after 4 attempts'));
  });

  test('the longest a call can take, and a config whose env.timeoutMs would cut it short', () => {
    assert.equal(new HttpRetriever('http://x/retrieve', { timeoutMs: 1000, retries: 5, backoffMs: 100 }).longestCallMs, 6 * 1000 + 100 + 200 + 400 + 800 + 800);
    assert.doesNotThrow(() => loadConfig(undefined, ['env.name=search', 'env.search.retriever.url=http://x/retrieve']));
    assert.throws(() => loadConfig(undefined, ['env.name=search', 'env.search.retriever.url=http://x/retrieve', 'env.search.retriever.timeoutMs=60000']),
      /env\.timeoutMs.*must exceed the 183000 ms one search step may take \(env\.search\.retriever: 3 attempts of up to 60000 ms/);
    assert.throws(() => loadConfig(undefined, ['env.name=search', 'env.search.retriever.url=ftp://x']), /env\.search\.retriever\.url/);
    assert.throws(() => loadConfig(undefined, ['env.name=search', 'env.search.retriever.protocol=elastic']), /env\.search\.retriever\.protocol/);
  });
});

/** A retriever that keeps every call's queries. */
class Recording implements Retriever {
  readonly calls: string[][] = [];
  constructor(private readonly inner: Retriever) {}
  async retrieve(queries: readonly string[], topk: number): Promise<RetrievalHit[][]> {
    this.calls.push([...queries]);
    return this.inner.retrieve(queries, topk);
  }
}

describe('search environment over a retrieval server', () => {
  test("one request per round: a round's searches go out together (Search-R1) or concurrently one by one (SDAR)", async () => {
    for (const protocol of ['search-r1', 'sdar'] as const) {
      const recording = new Recording(builtInSearchData().retriever);
      const server = await startRetrieverServer(recording, { protocol });
      try {
        const env = new SearchEnvironment({ retriever: new HttpRetriever(server.url, { protocol }) });
        const sessions = await Promise.all([0, 1, 2, 3, 4, 5].map((seed) => env.create({ split: 'train', seed })));
        const steps = await Promise.all(sessions.map((s) => {
          s.reset();
          return s.step(`<search> ${s.task} </search>`);
        }));
        assert.ok(steps.every((r) => r.observation.startsWith('\n\n<information>Doc 1(Title: ')));
        const expected = protocol === 'search-r1' ? [sessions.map((s) => s.task)] : sessions.map((s) => [s.task]);
        assert.deepEqual(recording.calls.map((c) => [...c].sort()).sort(), expected.map((c) => [...c].sort()).sort(), protocol);
      } finally {
        await server.close();
      }
    }
  });

  test('the expert wins with the built-in corpus served over HTTP, the retriever named by env.search.retriever', async () => {
    for (const protocol of ['search-r1', 'sdar'] as const) {
      const server = await startRetrieverServer(builtInSearchData().retriever, { protocol });
      try {
        const env = makeEnvironment(loadConfig(undefined, ['env.name=search', `env.search.retriever.url=${server.url}`, `env.search.retriever.protocol=${protocol}`]));
        await env.check?.();
        for (let seed = 0; seed < 10; seed++) {
          const session = await env.create({ split: 'valid_seen', seed });
          let r = await session.reset();
          let last;
          do {
            last = await session.step(r.info.expert_action as string);
            r = last;
          } while (!last.done);
          assert.equal(last.info.won, true, session.task);
        }
      } finally {
        await server.close();
      }
    }
  });

  test('a retriever that fails fails the step with its error, for every episode of the round', async () => {
    const down = await scriptedServer([], () => [500, 'Internal Server Error']);
    try {
      const env = new SearchEnvironment({ retriever: new HttpRetriever(down.url, FAST) });
      const sessions = await Promise.all([1, 2, 3].map((seed) => env.create({ split: 'train', seed })));
      const steps = sessions.map((s) => {
        s.reset();
        return s.step('<think>x</think><search> q </search>');
      });
      for (const step of steps) await assert.rejects(step, (e: Error) => e.message.includes(`POST ${down.url}: answered 500: Internal Server Error (gave up after 4 attempts)`));
      assert.equal(down.bodies.length, 4);
      await assert.rejects(env.check(), RetrieverError);
    } finally {
      await down.close();
    }
  });
});
