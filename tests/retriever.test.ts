import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Bm25Index, tokenize } from '../envs/bm25.ts';
import { startRetrieverServer, type RetrieverServer } from '../envs/retriever_server.ts';
import { builtInSearchData, SearchEnvironment } from '../envs/search/env.ts';
import { HttpRetriever } from '../envs/search/http_retriever.ts';
import { Bm25Retriever } from '../envs/search/retriever.ts';
import { loadConfig } from '../src/config/config.ts';
import { makeEnvironment } from '../src/eval/environment.ts';

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

describe('retriever server (Search-R1 /retrieve)', () => {
  let server: RetrieverServer;
  const local = new Bm25Retriever(corpus);

  before(async () => {
    server = await startRetrieverServer(local, { maxBodyBytes: 4096, maxTopk: 10 });
  });

  after(async () => {
    await server.close();
  });

  test('binds to 127.0.0.1 on an ephemeral port', () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/retrieve$/);
    assert.ok(server.port > 0);
  });

  test('batch form with scores', async () => {
    const r = await post(server.url, JSON.stringify({ queries: ['aster river', 'bread'], topk: 2, return_scores: true }));
    assert.equal(r.status, 200);
    const expected = local.retrieve(['aster river', 'bread'], 2);
    assert.deepEqual(r.json, { result: expected.map((list) => list.map((h) => ({ document: { id: h.document.id, contents: h.document.contents }, score: h.score }))) });
  });

  test('single-query form, and bare documents without scores', async () => {
    const r = await post(server.url, JSON.stringify({ query: 'quenthia capital', topk: 1, return_scores: false }));
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { result: [[{ id: 'd1', contents: corpus[1].contents }]] });
    const defaults = await post(server.url, JSON.stringify({ query: 'quenthia' }));
    assert.equal((defaults.json as { result: unknown[][] }).result[0].length, 3);
  });

  test('bad requests get 4xx with a message and the server keeps serving', async () => {
    const cases: [string, number, RegExp][] = [
      ['{not json', 400, /not valid JSON/],
      ['[1, 2]', 400, /JSON object/],
      ['{"topk": 3}', 400, /missing "queries"/],
      ['{"queries": "q"}', 400, /list of strings/],
      ['{"queries": [1]}', 400, /list of strings/],
      ['{"query": "q", "queries": ["q"]}', 400, /not both/],
      ['{"query": "q", "topk": 0}', 400, /topk/],
      ['{"query": "q", "topk": 11}', 400, /topk/],
      ['{"query": "q", "topk": 2.5}', 400, /topk/],
      ['{"query": "q", "return_scores": "yes"}', 400, /return_scores/],
      [JSON.stringify({ query: 'x'.repeat(5000) }), 413, /over 4096 bytes/],
    ];
    for (const [body, status, message] of cases) {
      const r = await post(server.url, body);
      assert.equal(r.status, status, body.slice(0, 40));
      assert.match((r.json as { error: string }).error, message);
    }
    const wrongPath = await post(server.url.replace('/retrieve', '/search'), '{}');
    assert.equal(wrongPath.status, 404);
    const get = await fetch(server.url);
    assert.equal(get.status, 405);
    await get.text();
    const health = await fetch(server.url.replace('/retrieve', '/health'));
    assert.deepEqual(await health.json(), { ok: true });
  });

  test('a chunked body without a length is capped while it streams', async () => {
    const { port } = server;
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/retrieve', method: 'POST', headers: { 'transfer-encoding': 'chunked' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.write('{"query": "');
      for (let i = 0; i < 10; i++) req.write('y'.repeat(1000));
      req.end('"}');
    });
    assert.equal(status, 413);
    assert.equal((await post(server.url, '{"query": "bread"}')).status, 200);
  });

  test('a retriever failure is a 500 with its message', async () => {
    const failing = await startRetrieverServer({ retrieve: () => { throw new Error('index offline'); } });
    try {
      const r = await post(failing.url, '{"query": "q"}');
      assert.equal(r.status, 500);
      assert.deepEqual(r.json, { error: 'index offline' });
    } finally {
      await failing.close();
    }
  });

  test('HttpRetriever gets what the in-process retriever gives, and reports HTTP errors', async () => {
    const remote = new HttpRetriever(server.url);
    assert.deepEqual(await remote.retrieve(['velmora', 'cakes'], 3), local.retrieve(['velmora', 'cakes'], 3));
    await assert.rejects(() => remote.retrieve(['q'], 50), /HTTP 400.*topk/);
  });
});

describe('search environment over a remote retriever', () => {
  test('the expert wins with the built-in corpus served over HTTP, the retriever named by env.search.retrieverUrl', async () => {
    const server = await startRetrieverServer(builtInSearchData().retriever);
    try {
      const env = makeEnvironment(loadConfig(undefined, ['env.name=search', `env.search.retrieverUrl=${server.url}`]));
      for (let seed = 0; seed < 20; seed++) {
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
  });

  test('a retriever that is down is named in the error', async () => {
    const server = await startRetrieverServer(builtInSearchData().retriever);
    const url = server.url;
    await server.close();
    const session = new SearchEnvironment({ retriever: new HttpRetriever(url) }).create({ split: 'train', seed: 1 });
    session.reset();
    await assert.rejects(session.step('<think>x</think><search> q </search>'), (e: Error) => e.message.includes(`retriever ${url}: unreachable`) && /retrieval server running/.test(e.message));
    assert.throws(() => loadConfig(undefined, ['env.name=search', 'env.search.retrieverUrl=ftp://x']), /env\.search\.retrieverUrl/);
  });
});
