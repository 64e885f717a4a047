// One sequence per episode against one per turn, on real episodes: the bundled model
// plays household tasks as a conversation (rollout.history conversation, whose prompts
// only grow under its ChatML template), and its episodes are scored both ways: the
// log-probs of every response token agree (policy and teacher) and the merged passes
// read a fraction of the prompt tokens. Then one iteration of each kind of method
// (KL, auxiliary terms over per-turn segments, teacher-weighted and turn-credited
// advantages, step groups) with one mini-batch ends with the same update and the same
// weights either way; for speed, the tiny household model trains there on episodes its
// environment's expert plays (a random model's tokens do not survive being decoded and
// re-encoded, so its conversations re-render), half of whose turns it writes invalid
// so that scores differ within a group.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { envPlugin } from '../envs/registry.ts';
import { HouseholdEnvironment } from '../envs/household/index.ts';
import { loadConfig } from '../src/config/config.ts';
import { runMethod } from '../src/config/methods.ts';
import { loadModel } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { AdamW } from '../src/optim/adamw.ts';
import { runRollout, type RolloutOptions } from '../src/rollout/agent_loop.ts';
import type { GenerationContext } from '../src/engines/engine.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { sequenceStats, turnSequences } from '../src/rollout/turn_sequences.ts';
import { trainingIteration, type IterationResult } from '../src/trainer/iteration.ts';
import { teacherLogprobs, teacherSequences } from '../src/trainer/teacher.ts';
import { responseLogprobs, splitMicroBatches } from '../src/trainer/update.ts';
import { assertClose, gpu } from './support/gpu.ts';
import { lazyTinyHouseholdModel } from './support/tiny_household.ts';

const BUNDLED = 'models/household-tiny';
const slow = { timeout: 600_000 };
const HOUSEHOLD = envPlugin('household').agent;
const root = mkdtempSync(join(tmpdir(), 'wgt-episodes-'));
after(() => rmSync(root, { recursive: true, force: true }));
const tinyModel = lazyTinyHouseholdModel(root);

/** Household as a conversation: `runs` runs of `tasks` tasks, up to `turns` turns. */
function rolloutOptions(engine: RolloutOptions['engine'], tokenizer: RolloutOptions['tokenizer'], o: { withSkills: RolloutOptions['withSkills']; tasks: number; runs: number; turns: number; responseTokens: number }): RolloutOptions {
  return {
    env: new HouseholdEnvironment(), spec: HOUSEHOLD, engine, tokenizer,
    tasks: Array.from({ length: o.tasks }, (_, i) => ({ split: 'train' as const, seed: 21 + i })), groupSize: o.runs, maxTurns: o.turns,
    maxPromptTokens: 1900, maxResponseTokens: o.responseTokens, sampling: { temperature: 1, seed: 5 }, history: 'conversation',
    withSkills: o.withSkills, invalidPenalty: 0.1, groupIdPrefix: 'it1-',
  };
}

/** The expert, except that odd runs answer every other turn without their think block (an invalid turn, penalised). */
class SloppyExpert extends ExpertEngine {
  override respond(context: GenerationContext): string {
    const answer = super.respond(context);
    return context.trajectoryId.endsWith('1') && context.turn % 2 === 1 ? answer.replace(/<think>[\s\S]*<\/think>\s*/, '') : answer;
  }
}

describe('episodes as one sequence, on the bundled model\'s household episodes', () => {
  test('every response token scores as in its own turn sample, policy and teacher, from far fewer prompt tokens', slow, async () => {
    await gpu();
    const tokenizer = await loadTokenizer(BUNDLED);
    const model = loadModel(BUNDLED, { trainable: false });
    try {
      const { samples } = await runRollout(rolloutOptions(new LocalEngine(model, { tokenizer }), tokenizer, { withSkills: 'teacher', tasks: 1, runs: 2, turns: 2, responseTokens: 20 }));
      for (const [label, merged, perTurn, score] of [
        ['policy', turnSequences(samples, { merge: true }), turnSequences(samples, { merge: false }),
          (seqs: ReturnType<typeof turnSequences>) => responseLogprobs(model, samples, splitMicroBatches(seqs, seqs.map((_, i) => i), 4096))],
        ['teacher', teacherSequences(samples, true), teacherSequences(samples, false),
          async (seqs: ReturnType<typeof turnSequences>) => (await teacherLogprobs({ kind: 'model', model }, samples, seqs, 4096)).logprobs],
      ] as const) {
        const m = sequenceStats(samples, merged);
        const t = sequenceStats(samples, perTurn);
        assert.equal(m.mergedEpisodes, 2, `${label}: both episodes merged`);
        assert.equal(m.responseTokens, t.responseTokens);
        assert.ok(m.scoredPromptTokens * 1.5 < t.scoredPromptTokens, `${label}: ${m.scoredPromptTokens} against ${t.scoredPromptTokens} prompt tokens`);
        const [a, b] = [await score(merged), await score(perTurn)];
        samples.forEach((s, i) => {
          assert.equal(a[i].length, s.responseIds.length);
          assertClose(a[i], b[i], { atol: 1e-5, label: `${label} sample ${i} (${s.trajectoryId} turn ${s.turn})` });
        });
      }
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });

});

describe('an iteration of each kind of method, merged and per turn', () => {
  for (const method of ['grpo', 'sdar', 'rlsd', 'pcsd', 'agent_opsd', 'gigpo']) {
    test(`${method}: one iteration with one mini-batch updates the weights as the per-turn path does`, slow, async () => {
      const dir = await tinyModel();
      const tokenizer = await loadTokenizer(dir);
      const reference = loadModel(dir, { trainable: false });
      const cfg = loadConfig(undefined, [`method=${method}`]);
      const run = async (mergeTurns: boolean): Promise<{ result: IterationResult; weights: Float32Array[] }> => {
        const model = loadModel(dir, { trainable: true });
        const params = model.parameters();
        try {
          const plan = runMethod(cfg).plan(1);
          const result = await trainingIteration({
            rollout: rolloutOptions(new SloppyExpert(tokenizer, HOUSEHOLD), tokenizer, { withSkills: plan.skills, tasks: 2, runs: 2, turns: 3, responseTokens: 64 }),
            update: {
              model, optimizer: new AdamW(params, { lr: 1e-4 }), params, lr: 1e-4,
              loss: { clipLow: 0.2, clipHigh: 0.2, dualClip: 3, klCoef: 0.01, entropyCoef: plan.entropyCoef, policyGradient: plan.policyGradient },
              // One mini-batch, cut into several micro-batches.
              gradClip: 1, miniBatchSize: 1 << 20, microBatchTokens: 1500, temperature: 1, shuffle: (n) => Array.from({ length: n }, (_, i) => n - 1 - i),
            },
            mergeTurns,
            reference: { kind: 'model', model: reference },
            plan,
          });
          return { result, weights: await Promise.all(params.map(async (p) => Float32Array.from(await p.toArray()))) };
        } finally {
          for (const p of params) p.dispose();
        }
      };
      try {
        const merged = await run(true);
        const perTurn = await run(false);
        assert.deepEqual(merged.result.rollout.samples.map((s) => s.responseIds), perTurn.result.rollout.samples.map((s) => s.responseIds), 'the same episodes');
        assert.equal(merged.result.metrics['episodes/merged'], 4);
        assert.ok(merged.result.rollout.samples.some((x) => !x.valid), 'some turns invalid');
        assert.equal(perTurn.result.metrics['episodes/merged'], 0);
        assert.ok(merged.result.metrics['tokens/scored_prompt'] * 2 < perTurn.result.metrics['tokens/scored_prompt']);
        const [u, v] = [merged.result.update!, perTurn.result.update!];
        assert.deepEqual([u.steps, u.trainedTokens], [1, v.trainedTokens]);
        assertClose([u.pgLoss, u.kl, u.entropy, u.clipFrac], [v.pgLoss, v.kl, v.entropy, v.clipFrac], { atol: 1e-5, label: 'losses' });
        assertClose([u.gradNorm], [v.gradNorm], { rtol: 1e-5, atol: 1e-6, label: 'gradient norm' });
        const keys = Object.keys(v.aux);
        assertClose(keys.map((k) => u.aux[k]), keys.map((k) => v.aux[k]), { atol: 1e-5, label: `aux ${keys.join(', ')}` });
        for (const k of Object.keys(perTurn.result.metrics).filter((k) => /^(teacher|rlsd|pcsd|agent_opsd|gigpo)\//.test(k))) {
          assertClose([merged.result.metrics[k]], [perTurn.result.metrics[k]], { atol: 1e-5, label: k });
        }
        merged.weights.forEach((w, i) => assertClose(w, perTurn.weights[i], { atol: 1e-5, label: `parameter ${i}` }));
      } finally {
        for (const p of reference.parameters()) p.dispose();
      }
    });
  }

  test('skill_grpo: the reference and the update run the skill cards their sequences share once, and score alike (KL 0 and ratios 1 from the same weights); one mini-batch takes its old log-probs from the update', slow, async () => {
    const dir = await tinyModel();
    const tokenizer = await loadTokenizer(dir);
    const reference = loadModel(dir, { trainable: false });
    const model = loadModel(dir, { trainable: true });
    const params = model.parameters();
    const optimizer = new AdamW(params, { lr: 1e-4 });
    try {
      const plan = runMethod(loadConfig(undefined, ['method=skill_grpo'])).plan(1);
      assert.equal(plan.skills, 'policy');
      // 16 runs of one task: their sequences begin with the same cards and task, enough rows for sharing to pay.
      const result = await trainingIteration({
        rollout: rolloutOptions(new SloppyExpert(tokenizer, HOUSEHOLD), tokenizer, { withSkills: plan.skills, tasks: 1, runs: 16, turns: 2, responseTokens: 64 }),
        update: {
          model, optimizer, params, lr: 1e-4,
          loss: { clipLow: 0.2, clipHigh: 0.2, dualClip: 3, klCoef: 0.01, entropyCoef: 0, policyGradient: true },
          gradClip: 1, miniBatchSize: 1 << 20, microBatchTokens: 32768, temperature: 1, shuffle: (n) => Array.from({ length: n }, (_, i) => i),
        },
        mergeTurns: true,
        reference: { kind: 'model', model: reference },
        plan,
      });
      assert.ok(result.metrics['tokens/reference_shared_prefix'] > 0, `reference: shared ${result.metrics['tokens/reference_shared_prefix']} tokens`);
      assert.equal(result.metrics['tokens/old_scored_sequences'], 0, 'the old pass scores nothing for one mini-batch');
      assert.ok(result.update!.sharedPrefixTokens > 0, `update: shared ${result.update!.sharedPrefixTokens} tokens`);
      // The only step's loss is taken before the weights move: the policy is the reference there, and the old policy.
      assert.ok(result.update!.kl < 1e-7, `kl ${result.update!.kl}`);
      assert.equal(result.update!.clipFrac, 0);
    } finally {
      optimizer.dispose();
      for (const p of [...params, ...reference.parameters()]) p.dispose();
    }
  });
});
