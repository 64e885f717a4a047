// The RL-iteration bench: its widened tokenizer (filler words that round-trip as one
// token each, the bundled ids untouched) and a tiny iteration of a random model and of
// the bundled one through `train`, whose phase times must add up.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { benchRlIteration, BUNDLED_MODEL, fillerWords, widenTokenizer } from '../src/bench/rl_iteration.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { gpu } from './support/gpu.ts';

describe('rl-iteration bench', () => {
  test('filler words are new, distinct, and skip what the vocabulary holds', () => {
    const words = fillerWords(30, new Set([' qa', ' qc']));
    assert.equal(words.length, 30);
    assert.equal(new Set(words).size, 30);
    assert.deepEqual(words.slice(0, 3), [' qb', ' qd', ' qe']);
    assert.ok(words.includes(' qba'), 'two letters after z');
  });

  test('the widened tokenizer keeps the bundled ids and adds words that decode and encode as one token', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'widen-'));
    try {
      const bundled = await loadTokenizer(BUNDLED_MODEL);
      const special = widenTokenizer(BUNDLED_MODEL, dir, bundled.vocabSize + 500);
      const wide = await loadTokenizer(dir);
      assert.equal(wide.vocabSize, bundled.vocabSize + 500);
      assert.deepEqual(wide.eosTokenIds, [special.eos]);
      assert.equal(special.eos, bundled.eosTokenIds[0]);
      assert.equal(special.pad, bundled.padTokenId);
      const text = 'You are in the middle of a room. > go to cabinet 1';
      assert.deepEqual(wide.encode(text), bundled.encode(text));
      const ids = [bundled.vocabSize, bundled.vocabSize + 7, bundled.vocabSize + 499];
      const decoded = wide.decode(ids);
      assert.match(decoded, /^( q[a-z]+){3}$/);
      assert.deepEqual(wide.encode(decoded), ids);
      assert.throws(() => widenTokenizer(BUNDLED_MODEL, dir, 10), /the model's vocabulary \(10\) is smaller than the tokenizer's/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--lora trains the bench model through adapters: a LoRA run holds less than its full-weight twin', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    // At 12.6M parameters the weights' gradients and moments outweigh a two-episode iteration's activations.
    const opts = { preset: 'small', tasks: 1, groupSize: 2, maxTurns: 1, maxResponseTokens: 4, iterations: 1, bundled: null };
    const [full] = (await benchRlIteration(rt, opts)) as Record<string, number>[];
    const [lora] = (await benchRlIteration(rt, { ...opts, lora: 4 })) as Record<string, number>[];
    assert.equal(full.lora_rank, 0);
    assert.equal(lora.lora_rank, 4);
    // No gradients or AdamW moments for the frozen base: the update holds far less.
    assert.ok(lora.update_peak_gib < full.update_peak_gib, `LoRA ${lora.update_peak_gib} GiB, full ${full.update_peak_gib} GiB`);
  });

  test('a random model and the bundled one each run an iteration; rollout, scoring and update add up to the step', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    await rt.sync();
    const held = rt.pool.stats.inUse;
    const rows = (await benchRlIteration(rt, { preset: 'household', tasks: 1, groupSize: 2, maxTurns: 2, maxResponseTokens: 8, iterations: 1 })) as Record<string, number | string>[];
    // Each run gives its weights, optimizer state and caches back as it ends.
    assert.equal(rt.pool.stats.inUse, held);
    for (const r of rows) assert.ok((r.peak_gib as number) > 0 && typeof r.update_peak_gib === 'number', JSON.stringify(r));
    assert.deepEqual(rows.map((r) => r.model), ['random-household', 'bundled']);
    for (const r of rows as Record<string, number>[]) {
      assert.equal(r.episodes, 2);
      assert.ok(r.turns >= 2 && r.turns <= 4, `turns ${r.turns}`);
      assert.ok(Math.abs(r.rollout_s + r.scoring_s + r.update_s - r.step_s) < 0.02, `${r.rollout_s} + ${r.scoring_s} + ${r.update_s} vs ${r.step_s}`);
      assert.ok(Math.abs(r.rollout_share + r.scoring_share + r.update_share - 1) < 0.005);
      assert.ok(r.rollout_engine_s > 0 && r.rollout_engine_s <= r.rollout_s);
      assert.ok(r.prompt_tokens_mean > 100, `prompt ${r.prompt_tokens_mean}`);
      assert.ok(r.trained_tokens > 0 && r.generated_tokens > 0);
      assert.equal(r.truncated_prompts, 0);
      assert.ok(r.peak_gib > 0, `peak ${r.peak_gib} GiB`);
      // The recipe's window prompts re-render the history: every turn is read as its own sequence.
      assert.equal(r.episodes_merged, 0);
      assert.ok(r.scored_prompt_tokens > r.turns * 100, `scored prompt ${r.scored_prompt_tokens}`);
      assert.ok(r.scoring_update_s > 0);
      // One mini-batch: its old log-probs are the update's own forward's, so the old pass
      // scores nothing, and the update plans its prefixes as the reference pass does.
      const shared = r.shared_prefix_tokens as unknown as Record<string, number>;
      assert.deepEqual(Object.keys(shared), ['old', 'reference', 'teacher', 'update']);
      assert.equal(shared.old, 0, JSON.stringify(shared));
      assert.equal(shared.update, shared.reference, JSON.stringify(shared));
    }
    // The random policy never finishes a task: every episode runs to the turn limit.
    const random = rows[0] as Record<string, number>;
    assert.equal(random.turns, 4);
    assert.equal(random.turns_per_episode, 2);
    assert.equal(random.episodes_per_turn, 2);
    assert.equal(random.params_m, 3.3);
  });
});
