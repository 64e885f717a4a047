// The shared HTTP call (src/net/http_call.ts): retries end at a total deadline as well
// as a count, the hook before each retry sees what failed and may stop the retries,
// and which statuses are retried is the caller's to say.

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { callServer, EngineHttpError, type AttemptFailure } from '../src/net/http_call.ts';

async function server(status: (n: number) => number): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let n = 0;
  const s: Server = createServer((_req, res) => {
    n++;
    const code = status(n);
    res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(code === 200 ? { ok: n } : { error: { message: `busy ${n}` } }));
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/x`,
    hits: () => n,
    close: () => new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    }),
  };
}

const base = { timeoutMs: 2000, retries: Infinity, backoffMs: 20, maxBackoffMs: 40, retryTimeouts: false };

describe('callServer', () => {
  test('a deadline bounds the retries when the count does not', async () => {
    const s = await server(() => 503);
    const t0 = performance.now();
    await assert.rejects(callServer({ url: s.url, method: 'GET' }, { ...base, deadlineMs: 300 }), (e: EngineHttpError) =>
      e.status === 503 && e.kind === 'server' && /answered 503: busy \d+ \(gave up after \d+ attempts\)/.test(e.message));
    const took = performance.now() - t0;
    assert.ok(took < 1500 && s.hits() >= 5, `${took} ms, ${s.hits()} attempts`);
    await s.close();
  });

  test('the hook sees each failure before its retry and can stop them; retried statuses are the caller\'s choice', async () => {
    const s = await server((n) => (n < 3 ? 502 : 200));
    const seen: AttemptFailure[] = [];
    assert.deepEqual(await callServer({ url: s.url, method: 'GET' }, { ...base, beforeRetry: (f) => void seen.push(f) }), { ok: 3 });
    assert.deepEqual(seen.map((f) => [f.attempt, f.kind, f.status, f.reason]), [[1, 'server', 502, 'answered 502: busy 1'], [2, 'server', 502, 'answered 502: busy 2']]);
    assert.ok(seen.every((f) => f.url === s.url && f.deadlineMs === Infinity && f.elapsedMs >= 0));

    const stop = new Error('another server takes the work');
    const t = await server(() => 500);
    await assert.rejects(callServer({ url: t.url, method: 'GET' }, { ...base, beforeRetry: () => { throw stop; } }), (e) => e === stop);
    assert.equal(t.hits(), 1);
    await assert.rejects(callServer({ url: t.url, method: 'GET' }, { ...base, retryStatus: (st) => st === 503 }), (e: EngineHttpError) => e.status === 500 && /answered 500: busy 2$/.test(e.message));
    assert.equal(t.hits(), 2, 'a 500 the caller does not retry is sent once');
    await s.close();
    await t.close();
  });

  test('a server that is not there is "unreachable" to the hook', async () => {
    const s = await server(() => 200);
    const url = s.url;
    await s.close();
    const kinds: string[] = [];
    await assert.rejects(callServer({ url, method: 'GET' }, { ...base, retries: 2, beforeRetry: (f) => void kinds.push(f.kind) }), (e: EngineHttpError) =>
      e.kind === 'unreachable' && e.status === null && /cannot reach the server .*gave up after 3 attempts/.test(e.message));
    assert.deepEqual(kinds, ['unreachable', 'unreachable']);
  });
});
