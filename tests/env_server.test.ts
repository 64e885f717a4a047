import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { HouseholdEnvironment, type HouseholdInfo } from '../envs/household/env.ts';
import { serveEnvironment, type EnvServerHandle } from '../envs/server.ts';
import { RemoteEnvError, RemoteEnvironment, SessionLostError } from '../src/envs/client.ts';

const household = new HouseholdEnvironment();

interface Answer {
  status: number;
  body: any;
}

async function call(base: string, method: string, path: string, body?: unknown, raw?: string): Promise<Answer> {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : JSON.parse(text) };
}

/** Creates a session and plays the expert's advice to the end over HTTP. */
async function playOverHttp(base: string, seed: number): Promise<{ id: string; won: boolean; steps: number }> {
  const created = await call(base, 'POST', '/envs', { split: 'train', seed, task: null });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  let info = created.body.info as HouseholdInfo;
  let steps = 0;
  while (info.expert_action !== null) {
    const r = await call(base, 'POST', `/envs/${created.body.id}/step`, { action: info.expert_action });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    steps++;
    info = r.body.info;
    if (r.body.done) return { id: created.body.id, won: r.body.info.won, steps };
  }
  return { id: created.body.id, won: false, steps };
}

describe('environment server protocol', () => {
  let server: EnvServerHandle;
  before(async () => {
    server = await serveEnvironment(household, { port: 0, maxBodyBytes: 4096 });
  });
  after(async () => {
    await server.close();
  });

  test('health names the environment', async () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const r = await call(server.url, 'GET', '/health');
    assert.deepEqual([r.status, r.body.ok, r.body.env, r.body.version, r.body.max_steps], [200, true, 'household', household.version, 50]);
  });

  test('create, step and delete a session', async () => {
    const created = await call(server.url, 'POST', '/envs', { split: 'valid_seen', seed: 17 });
    assert.equal(created.status, 200);
    const local = household.create({ split: 'valid_seen', seed: 17 });
    const first = local.reset();
    assert.equal(typeof created.body.id, 'string');
    assert.equal(created.body.task, local.task);
    assert.equal(created.body.observation, first.observation);
    assert.deepEqual(created.body.admissible_actions, first.admissible_actions);
    assert.deepEqual(created.body.info, first.info);

    const action = first.admissible_actions.find((a) => a.startsWith('go to '))!;
    const stepped = await call(server.url, 'POST', `/envs/${created.body.id}/step`, { action });
    assert.equal(stepped.status, 200);
    assert.deepEqual(stepped.body, local.step(action));

    assert.deepEqual(await call(server.url, 'DELETE', `/envs/${created.body.id}`), { status: 200, body: { closed: true } });
    const gone = await call(server.url, 'POST', `/envs/${created.body.id}/step`, { action: 'look' });
    assert.equal(gone.status, 404);
    assert.match(gone.body.error, /unknown session/);
    assert.equal((await call(server.url, 'DELETE', `/envs/${created.body.id}`)).status, 404);
  });

  test('malformed requests get 400 naming the problem', async () => {
    const cases: [string | undefined, unknown, RegExp][] = [
      ['{"split": "train", "seed": ', undefined, /malformed JSON/],
      ['[1, 2]', undefined, /must be a JSON object/],
      [undefined, { seed: 1 }, /field "split"/],
      [undefined, { split: 'test', seed: 1 }, /field "split": unknown split "test"/],
      [undefined, { split: 'train' }, /field "seed"/],
      [undefined, { split: 'train', seed: -3 }, /field "seed"/],
      [undefined, { split: 'train', seed: 2.5 }, /field "seed"/],
      [undefined, { split: 'train', seed: '4' }, /field "seed"/],
      [undefined, { split: 'train', seed: 2_000_000_000 }, /seed must be an integer in \[0, 1000000000\)/],
      [undefined, { split: 'train', seed: 1, task: { task_type: 'juggle' } }, /task.task_type/],
    ];
    for (const [raw, body, message] of cases) {
      const r = await call(server.url, 'POST', '/envs', body, raw);
      assert.equal(r.status, 400, `${raw ?? JSON.stringify(body)} -> ${r.status}`);
      assert.match(r.body.error, message);
    }
    const created = await call(server.url, 'POST', '/envs', { split: 'train', seed: 1 });
    for (const [raw, body] of [['not json', undefined], [undefined, { act: 'look' }], [undefined, { action: 3 }]] as const) {
      const r = await call(server.url, 'POST', `/envs/${created.body.id}/step`, body, raw);
      assert.equal(r.status, 400);
      assert.match(r.body.error, raw ? /malformed JSON/ : /field "action" must be a string/);
    }
    assert.equal((await call(server.url, 'GET', '/nowhere')).status, 404);
    assert.equal((await call(server.url, 'GET', '/envs')).status, 405);
    assert.equal((await call(server.url, 'GET', '/health')).status, 200, 'the server survived');
  });

  test('unknown sessions get 404 and steps after the end get 409', async () => {
    const unknown = await call(server.url, 'POST', '/envs/no-such-id/step', { action: 'look' });
    assert.deepEqual([unknown.status, unknown.body.error], [404, 'unknown session "no-such-id"']);
    const played = await playOverHttp(server.url, 31);
    assert.ok(played.won);
    const late = await call(server.url, 'POST', `/envs/${played.id}/step`, { action: 'look' });
    assert.equal(late.status, 409);
    assert.match(late.body.error, /episode is over/);
    assert.equal((await call(server.url, 'DELETE', `/envs/${played.id}`)).status, 200);
  });

  test('bodies over the limit get 413 and the server keeps serving', async () => {
    const big = JSON.stringify({ split: 'train', seed: 1, task: null, padding: 'x'.repeat(10_000) });
    const r = await call(server.url, 'POST', '/envs', undefined, big);
    assert.equal(r.status, 413);
    assert.match(r.body.error, /larger than 4096 bytes/);
    assert.equal((await call(server.url, 'GET', '/health')).status, 200);
  });

  test('50 concurrent sessions each play the expert to completion', async () => {
    const before = server.sessionCount();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => playOverHttp(server.url, 1000 + i)));
    assert.equal(new Set(results.map((r) => r.id)).size, 50);
    for (const r of results) assert.ok(r.won && r.steps <= 50);
    assert.equal(server.sessionCount(), before + 50);
    await Promise.all(results.map((r) => call(server.url, 'DELETE', `/envs/${r.id}`)));
    assert.equal(server.sessionCount(), before);
  });

  test('steps sent at once to one session are applied one at a time', async () => {
    const created = await call(server.url, 'POST', '/envs', { split: 'train', seed: 44 });
    const answers = await Promise.all(
      Array.from({ length: 53 }, () => call(server.url, 'POST', `/envs/${created.body.id}/step`, { action: 'look' })),
    );
    assert.equal(answers.filter((a) => a.status === 200).length, 50);
    assert.equal(answers.filter((a) => a.status === 409).length, 3);
    assert.equal(answers.filter((a) => a.status === 200 && a.body.done).length, 1, 'exactly one step ends the episode');
    await call(server.url, 'DELETE', `/envs/${created.body.id}`);
  });
});

describe('environment server housekeeping', () => {
  test('idle sessions are reclaimed', async () => {
    const server = await serveEnvironment(household, { idleTimeoutMs: 80 });
    try {
      const created = await call(server.url, 'POST', '/envs', { split: 'train', seed: 3 });
      assert.equal(server.sessionCount(), 1);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(server.sessionCount(), 0);
      assert.equal((await call(server.url, 'POST', `/envs/${created.body.id}/step`, { action: 'look' })).status, 404);
    } finally {
      await server.close();
    }
  });

  test('creating past maxSessions answers 503', async () => {
    const server = await serveEnvironment(household, { maxSessions: 2 });
    try {
      for (const seed of [1, 2]) assert.equal((await call(server.url, 'POST', '/envs', { split: 'train', seed })).status, 200);
      const full = await call(server.url, 'POST', '/envs', { split: 'train', seed: 3 });
      assert.equal(full.status, 503);
      assert.match(full.body.error, /too many sessions \(at most 2\)/);
    } finally {
      await server.close();
    }
  });
});

describe('RemoteEnvironment client', () => {
  let server: EnvServerHandle;
  before(async () => {
    server = await serveEnvironment(household, { port: 0 });
  });
  after(async () => {
    await server.close();
  });

  test('plays a remote episode exactly like the in-process one', async () => {
    const remote = await RemoteEnvironment.connect(server.url, { timeoutMs: 5000 });
    assert.deepEqual([remote.name, remote.version, remote.maxSteps], ['household', household.version, 50]);
    for (const seed of [5, 6]) {
      const rs = await remote.create({ split: 'valid_unseen', seed });
      const local = household.create({ split: 'valid_unseen', seed });
      assert.equal(rs.task, local.task);
      const first = await rs.reset();
      assert.deepEqual(first, local.reset());
      let info = first.info as HouseholdInfo;
      let won = false;
      while (info.expert_action !== null) {
        const r = await rs.step(info.expert_action);
        assert.deepEqual(r, local.step(info.expert_action));
        info = r.info as HouseholdInfo;
        won = r.info.won;
        if (r.done) break;
      }
      assert.ok(won);
      const late = await rs.step('look').then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(late instanceof RemoteEnvError);
      assert.equal(late.status, 409);
      assert.ok(late.message.includes(server.url) && late.message.includes(`POST /envs/${rs.sessionId}/step -> 409`), late.message);

      const oldId = rs.sessionId;
      const again = await rs.reset();
      assert.notEqual(rs.sessionId, oldId);
      assert.deepEqual(again, household.create({ split: 'valid_unseen', seed }).reset());
      await rs.close();
      await rs.close();
    }
    assert.equal(server.sessionCount(), 0);
  });

  test('errors name the server and the request', async () => {
    const remote = await RemoteEnvironment.connect(server.url);
    await assert.rejects(remote.create({ split: 'nope' as 'train', seed: 1 }), (e: unknown) => {
      assert.ok(e instanceof RemoteEnvError && e.status === 400);
      assert.ok(e.message.startsWith(`household server ${server.url}: POST /envs -> 400: field "split"`), e.message);
      return true;
    });

    const closed = await serveEnvironment(household);
    const deadUrl = closed.url;
    await closed.close();
    await assert.rejects(RemoteEnvironment.connect(deadUrl, { timeoutMs: 2000 }), (e: unknown) => {
      assert.ok(e instanceof RemoteEnvError && e.status === null);
      assert.ok(e.message.includes(`environment server ${deadUrl}: GET /health failed`), e.message);
      return true;
    });

    const silent: Server = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const stuck = new RemoteEnvironment(silentUrl, { name: 'household', version: '1', maxSteps: 50 }, { timeoutMs: 150 });
      await assert.rejects(stuck.create({ split: 'train', seed: 1 }), /household server http:\/\/127\.0\.0\.1:\d+: POST \/envs timed out after 150 ms/);
    } finally {
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
  });
});

describe('RemoteEnvironment.check and lost sessions', () => {
  test('a server of the config\'s kind passes; another kind, a dead one or a non-protocol one is refused naming what answered', async () => {
    const server = await serveEnvironment(household);
    try {
      const meta = { version: 'remote', maxSteps: 50 };
      await new RemoteEnvironment(server.url, { name: 'household', ...meta }, { accepts: ['household', 'alfworld'] }).check();
      await assert.rejects(new RemoteEnvironment(server.url, { name: 'shop', ...meta }, { accepts: ['shop', 'webshop'] }).check(), (e: unknown) => {
        assert.ok(e instanceof RemoteEnvError);
        assert.equal(e.message, `environment server ${server.url} serves the household environment, but the config's env is shop: point env.url at a shop server, or set env.name to the server's`);
        return true;
      });
      const notOurs = createServer((_, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}'));
      await new Promise<void>((r) => notOurs.listen(0, '127.0.0.1', r));
      const notOursUrl = `http://127.0.0.1:${(notOurs.address() as AddressInfo).port}`;
      try {
        await assert.rejects(new RemoteEnvironment(notOursUrl, { name: 'household', ...meta }).check(), /GET \/health -> 404: not a healthy environment server of this project's protocol .*an AgentGym server wants env.agentgym=true/);
      } finally {
        notOurs.closeAllConnections();
        await new Promise((r) => notOurs.close(r));
      }
    } finally {
      await server.close();
    }
    await assert.rejects(new RemoteEnvironment(server.url, { name: 'household', version: 'remote', maxSteps: 50 }).check(), /GET \/health failed.*is the server running\?/);
  });

  test('a step in a session the server no longer holds throws SessionLostError', async () => {
    const server = await serveEnvironment(household, { idleTimeoutMs: 50 });
    try {
      const remote = new RemoteEnvironment(server.url, { name: 'household', version: 'remote', maxSteps: 50 });
      const session = await remote.create({ split: 'train', seed: 4 });
      await session.reset();
      await new Promise((r) => setTimeout(r, 300));
      await assert.rejects(session.step('look'), (e: unknown) => e instanceof SessionLostError && e.status === 404);
    } finally {
      await server.close();
    }
  });
});
