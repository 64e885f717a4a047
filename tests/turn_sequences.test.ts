// Which turns train as one sequence, read from the token ids: a turn joins the previous
// one of its trajectory when its prompt starts with that turn's prompt and response.
// Then, on real episodes (the environments' experts) through each template: the
// household, shop and search prompts as the reference renders them (a window of recent
// turns, one user message) never merge under any template; a conversation
// (rollout.history conversation) merges under ChatML templates (the bundled model's,
// Qwen2.5's) and not under Qwen3's or Qwen3.5's, which close an empty think block in
// the generation prompt that they do not render in earlier turns.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { envPlugin } from '../envs/registry.ts';
import { loadConfig } from '../src/config/config.ts';
import { makeEnvironment } from '../src/envs/environment.ts';
import { loadTokenizer, type Tokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import type { PromptHistory } from '../src/rollout/conversation.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { sequenceStats, turnSequences } from '../src/rollout/turn_sequences.ts';
import { teacherPrompt } from '../src/trainer/teacher.ts';
import { describePacking } from '../src/trainer/iteration.ts';
import { miniBatches, splitMicroBatches } from '../src/trainer/update.ts';
import { FAMILIES, familyDir } from './support/qwen_templates.ts';

function sample(trajectoryId: string, turn: number, promptIds: number[], responseIds: number[], teacherPromptIds?: number[]): StepSample {
  return {
    groupId: 'g', trajectoryId, turn, taskType: 't', promptIds, responseIds, responseLogprobs: responseIds.map(() => -1),
    valid: true, score: 0, episodeReturn: 0, won: false, state: '', ...(teacherPromptIds ? { teacherPromptIds } : {}),
  };
}

describe('turn sequences', () => {
  // Trajectory a: three turns, each prompt the previous prompt + response + two new tokens; turn 2's prompt
  // re-renders (its start changed). Trajectory b: two turns that would chain, but b's first has no response.
  const samples = [
    sample('a', 0, [1, 2], [3, 4]),
    sample('a', 1, [1, 2, 3, 4, 9, 9], [5]),
    sample('a', 2, [7, 2, 3, 4, 9, 9, 5, 8], [6, 6]),
    sample('b', 0, [1], []),
    sample('b', 1, [1, 9], [2]),
  ];

  test('append-only turns share a sequence; a re-rendered prompt or another trajectory starts one', () => {
    const seqs = turnSequences(samples, { merge: true });
    assert.deepEqual(seqs.map((q) => q.ids), [[1, 2, 3, 4, 9, 9, 5], [7, 2, 3, 4, 9, 9, 5, 8, 6, 6], [1, 9, 2]]);
    assert.deepEqual(seqs.map((q) => q.turns), [
      [{ sample: 0, start: 2, length: 2 }, { sample: 1, start: 6, length: 1 }],
      [{ sample: 2, start: 8, length: 2 }],
      [{ sample: 3, start: 1, length: 0 }, { sample: 4, start: 2, length: 1 }],
    ]);
    assert.deepEqual(seqs.map((q) => q.responseTokens), [3, 2, 1]);
    // Trajectory a is cut in two, b is one sequence; the prompt tokens read drop from 2 + 6 + 8 + 2 to 4 + 8 + 2.
    assert.deepEqual(sequenceStats(samples, seqs), { sequences: 3, scoredPromptTokens: 14, responseTokens: 6, mergedEpisodes: 1, splitEpisodes: 1 });
  });

  test('merge off, or turns out of order: one sequence per turn, as the samples are', () => {
    const perTurn = turnSequences(samples, { merge: false });
    assert.deepEqual(perTurn.map((q) => q.ids), samples.map((s) => [...s.promptIds, ...s.responseIds]));
    assert.deepEqual(sequenceStats(samples, perTurn), { sequences: 5, scoredPromptTokens: 18, responseTokens: 6, mergedEpisodes: 0, splitEpisodes: 2 });
    // Turn 1 of a before its turn 0: nothing to extend.
    assert.equal(turnSequences([samples[1], samples[0]], { merge: true }).length, 2);
  });

  test('the teacher pass chains on its own prompts', () => {
    const t = [sample('a', 0, [1], [3], [8, 1]), sample('a', 1, [1, 3, 4], [5], [8, 1, 3, 4])];
    assert.equal(turnSequences(t, { merge: true, prompt: teacherPrompt }).length, 1);
    // The teacher's block changed at turn 1: its turns score apart while the policy's merge.
    const u = [t[0], { ...t[1], teacherPromptIds: [6, 1, 3, 4] }];
    assert.equal(turnSequences(u, { merge: true }).length, 1);
    assert.equal(turnSequences(u, { merge: true, prompt: teacherPrompt }).length, 2);
  });

  test('mini-batches are whole sequences, closed at miniBatchSize turns; with a turn a sequence, exactly the per-turn slices', () => {
    const seqs = turnSequences(samples, { merge: true });
    assert.deepEqual(miniBatches(seqs, [2, 0, 1], 3), [[2, 0], [1]]);
    assert.deepEqual(miniBatches(seqs, [2, 0, 1], 2), [[2], [0], [1]]);
    assert.deepEqual(miniBatches(seqs, [0, 1, 2], 5), [[0, 1, 2]]);
    const perTurn = turnSequences(samples, { merge: false });
    assert.deepEqual(miniBatches(perTurn, [4, 3, 2, 1, 0], 2), [[4, 3], [2, 1], [0]]);
    // A sequence without response tokens is not packed; a merged one is packed whole, its turns as segments.
    const mbs = splitMicroBatches(seqs, [0, 1, 2], 1 << 16);
    assert.deepEqual(mbs[0].segments, [
      { sample: 2, start: 0, length: 2 }, { sample: 0, start: 2, length: 2 }, { sample: 1, start: 4, length: 1 },
      { sample: 3, start: 5, length: 0 }, { sample: 4, start: 5, length: 1 },
    ]);
    assert.equal(mbs[0].responseTokens, 6);
  });

  test('the run log names the packing of each pass', () => {
    const seqs = turnSequences(samples, { merge: true });
    const stats = sequenceStats(samples, seqs);
    const perTurn = sequenceStats(samples, turnSequences(samples, { merge: false }));
    assert.match(describePacking({ sequences: stats, teacherSequences: null }, true)!.line, /^scoring and training: 1 episodes as one sequence, 1 cut where a prompt re-renders the history \(14 prompt tokens scored for 6 response tokens\)$/);
    assert.match(describePacking({ sequences: perTurn, teacherSequences: null }, true)!.line, /one sequence per turn: the prompts re-render the history, not append-only/);
    assert.match(describePacking({ sequences: perTurn, teacherSequences: perTurn }, false)!.line, /optim.mergeTurns off .*; teacher: one sequence per turn, optim.mergeTurns off/);
    assert.notEqual(describePacking({ sequences: stats, teacherSequences: null }, true)!.key, describePacking({ sequences: perTurn, teacherSequences: null }, true)!.key);
    assert.equal(describePacking({ sequences: null, teacherSequences: null }, true), null);
  });
});

// The templates: the bundled model's (ChatML), and Qwen2.5's, Qwen3's and Qwen3.5's
// over the Qwen vocabulary (tests/fixtures/chat_templates), thinking off as the runs
// default to it.
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-sequences-'));
after(() => fs.rmSync(work, { recursive: true, force: true }));

const TOKENIZERS: Record<string, () => Promise<Tokenizer>> = {
  bundled: () => loadTokenizer('models/household-tiny'),
  ...Object.fromEntries(FAMILIES.map((f) => [f, () => loadTokenizer(familyDir(f, work))])),
};
/** The templates that render a conversation's earlier turns as they were written. */
const APPEND_ONLY = new Set(['bundled', 'qwen2.5']);

/** Expert episodes of `env` (two tasks), with teacher prompts, through `tokenizer`'s template. */
async function expertSamples(env: string, tokenizer: Tokenizer, history: PromptHistory, placement: 'before_template' | 'user_message' = 'before_template'): Promise<StepSample[]> {
  const spec = envPlugin(env).agent;
  const { samples, trajectories } = await runRollout({
    env: makeEnvironment(loadConfig(undefined, [`env.name=${env}`])), spec, engine: new ExpertEngine(tokenizer, spec), tokenizer,
    tasks: [{ split: 'train', seed: 3 }, { split: 'train', seed: 4 }], groupSize: 1, maxTurns: 6, maxPromptTokens: 1 << 20, maxResponseTokens: 256,
    withSkills: 'teacher', teacherSkillsPlacement: placement, history,
  });
  assert.ok(trajectories.every((t) => t.error === undefined), `${env}: ${trajectories.map((t) => t.error).join('; ')}`);
  assert.ok(trajectories.some((t) => t.turns.length >= 2), `${env}: the expert's episodes have several turns`);
  assert.ok(trajectories.every((t) => (t.history === 'conversation') === (history === 'conversation')));
  return samples;
}

describe('append-only prompts by token ids, per environment and template', () => {
  for (const env of ['household', 'shop', 'search']) {
    for (const [name, load] of Object.entries(TOKENIZERS)) {
      test(`${env}, ${name} template: the window re-renders; a conversation ${APPEND_ONLY.has(name) ? 'only grows' : 're-renders too'}`, async () => {
        const tokenizer = await load();
        const window = await expertSamples(env, tokenizer, 'window');
        const w = sequenceStats(window, turnSequences(window, { merge: true }));
        assert.equal(w.mergedEpisodes, 0);
        assert.ok(w.splitEpisodes > 0);
        const chat = await expertSamples(env, tokenizer, 'conversation');
        for (const prompt of [undefined, teacherPrompt]) {
          const c = sequenceStats(chat, turnSequences(chat, { merge: true, prompt }));
          if (!APPEND_ONLY.has(name)) assert.equal(c.mergedEpisodes, 0, `${env} conversation under the ${name} template`);
          else {
            assert.equal(c.splitEpisodes, 0, `${env} conversation under the ${name} template`);
            assert.ok(c.mergedEpisodes > 0);
            const perTurn = sequenceStats(chat, turnSequences(chat, { merge: false, prompt }));
            assert.ok(c.scoredPromptTokens < perTurn.scoredPromptTokens / 1.5, `${c.scoredPromptTokens} against ${perTurn.scoredPromptTokens} prompt tokens`);
            assert.equal(c.responseTokens, perTurn.responseTokens);
          }
        }
      });
    }
  }

  test('a conversation: the first message is the environment\'s prompt, later ones its answer and the actions it admits', async () => {
    const tokenizer = await TOKENIZERS.bundled();
    const spec = envPlugin('household').agent;
    const { trajectories, samples } = await runRollout({
      env: makeEnvironment(loadConfig(undefined, ['env.name=household'])), spec, engine: new ExpertEngine(tokenizer, spec), tokenizer,
      tasks: [{ split: 'train', seed: 3 }], groupSize: 1, maxTurns: 2, maxPromptTokens: 1 << 20, maxResponseTokens: 256, history: 'conversation',
    });
    const [t0, t1] = trajectories[0].turns;
    assert.match(t0.prompt, /^You are an expert agent operating in a household environment/);
    assert.equal(t1.prompt.split('\n')[0], `Observation: ${t0.observation.trim()}`);
    assert.match(t1.prompt, /\nAdmissible actions: \['.+'\]$/);
    const chat = tokenizer.decode(samples[1].promptIds);
    assert.equal(chat, `<|im_start|>user\n${t0.prompt}<|im_end|>\n<|im_start|>assistant\n${t0.response}<|im_end|>\n<|im_start|>user\n${t1.prompt}<|im_end|>\n<|im_start|>assistant\n`);
  });

  test('a conversation\'s teacher with the block inside the first user message only grows too', async () => {
    const chat = await expertSamples('household', await TOKENIZERS.bundled(), 'conversation', 'user_message');
    const c = sequenceStats(chat, turnSequences(chat, { merge: true, prompt: teacherPrompt }));
    assert.deepEqual([c.mergedEpisodes > 0, c.splitEpisodes], [true, 0]);
    assert.ok(chat[0].teacherPromptIds!.length > chat[0].promptIds.length, 'the block is in the teacher\'s first message');
  });
});
