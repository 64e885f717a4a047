// Scoring sequences that share a prefix: the groups a pass runs once (worked by hand),
// the log-probs after a cached prefix against the whole sequences' on Qwen2 and
// Qwen3.5 (whose Gated DeltaNet layers carry a recurrent state past the prefix), an
// engine's scoring of completions (scoreTails: a frozen teacher's pass), and
// the teacher pass on the bundled model's household turns, whose skills blocks it
// runs once, against scoring each prompt whole.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { envPlugin } from '../envs/registry.ts';
import { HouseholdEnvironment } from '../envs/household/index.ts';
import type { CausalLM } from '../src/models/causal_lm.ts';
import { loadCausalLM, loadModel } from '../src/models/load.ts';
import { packLeft, packRight, packedLogprobs, scoreSequences, scoreTails, spanPositions } from '../src/scoring/score.ts';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import { groupsThatPay, sharedPrefixGroups } from '../src/scoring/shared_prefix.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { noGrad } from '../src/tensor/autograd.ts';
import { scope } from '../src/tensor/scope.ts';
import { teacherLogprobs, teacherSequences } from '../src/trainer/teacher.ts';
import { responseLogprobs, scoringMicroBatches, splitMicroBatches } from '../src/trainer/update.ts';
import { assertClose, gpu } from './support/gpu.ts';
import { tinyQwen } from './support/tiny_qwen.ts';

const slow = { timeout: 600_000 };
/** The runtime's default costs, and costs of nothing but tokens: every group that saves a token is taken. */
const COSTS = kernelPolicy().scoring;
const TOKENS_ONLY = { batch: 0, prefixPass: 0, row: 0 };

describe('groups of sequences sharing a prefix', () => {
  // Sorted, neighbours share 5, 4, 2, 0 and 3 tokens.
  const seqs = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 7], [1, 2, 3, 4, 8, 9], [1, 2, 9, 9], [5, 5, 5], [5, 5, 5, 1]];
  const all = seqs.map((_, i) => i);
  const open = seqs.map(() => 10);

  test('the cut that saves the most tokens: (members - 1) x prefix, less the overhead a group', () => {
    // 0-2 at 4 saves 8, 4-5 at 3 saves 3: 11, against 0-3 at 2 (6) or 0-1 at 5 and 2-3 at 2 (7).
    assert.deepEqual(sharedPrefixGroups(seqs, all, open, 0), { groups: [{ prefix: 4, members: [0, 1, 2] }, { prefix: 3, members: [4, 5] }], alone: [3] });
    // An overhead of 3 a group leaves 4-5 (3 - 3 = 0) alone; 0-2 still saves 5.
    assert.deepEqual(sharedPrefixGroups(seqs, all, open, 3), { groups: [{ prefix: 4, members: [0, 1, 2] }], alone: [3, 4, 5] });
    assert.deepEqual(sharedPrefixGroups(seqs, all, open, 8), { groups: [], alone: all });
    // Given in any order, the groups are the same.
    assert.deepEqual(sharedPrefixGroups(seqs, [5, 3, 1, 4, 0, 2], open, 0), sharedPrefixGroups(seqs, all, open, 0));
  });

  test('a member\'s limit caps its group\'s prefix, and only the given indices are grouped', () => {
    // Sequence 1 allows 2 tokens: 0-3 at 2 saves 6 against 0-2 at 2 (4).
    const limits = [10, 2, 10, 10, 10, 10];
    assert.deepEqual(sharedPrefixGroups(seqs, [0, 1, 2, 3], limits, 0), { groups: [{ prefix: 2, members: [0, 1, 2, 3] }], alone: [] });
    assert.deepEqual(sharedPrefixGroups(seqs, [0, 2, 4], open, 0), { groups: [{ prefix: 4, members: [0, 2] }], alone: [4] });
    assert.deepEqual(sharedPrefixGroups(seqs, all, seqs.map(() => 0), 0), { groups: [], alone: all });
    assert.throws(() => sharedPrefixGroups(seqs, all, [1], 0), /1 limits for 6 sequences/);
  });

  test('micro-batches: a scored position stays after the prefix, the budget counts whole rows', () => {
    // Three sequences begin [7, 7, 7, 7]; the second's response starts at 3, so their prefix stops at 2.
    const q = (ids: number[], start: number, sample: number) => ({ ids, turns: [{ sample, start, length: ids.length - start }], responseTokens: ids.length - start });
    const sequences = [q([7, 7, 7, 7, 1, 2], 5, 0), q([7, 7, 7, 7, 3], 3, 1), q([7, 7, 7, 7, 5, 6, 8], 5, 2), q([4, 4], 1, 3)];
    const shared = scoringMicroBatches(sequences as never, 14, TOKENS_ONLY);
    const grouped = shared.batches.filter((mb) => mb.prefix);
    // Rows of 7 and 6 tokens fill 14 two at a time: [2, 0], then [1]; each runs [7, 7].
    assert.deepEqual(grouped.map((mb) => [mb.prefix, mb.sequences]), [[[7, 7], [2, 0]], [[7, 7], [1]]]);
    assert.equal(shared.sharedTokens, 2);
    assert.deepEqual(shared.batches.filter((mb) => !mb.prefix).map((mb) => mb.sequences), [[3]]);
    // Right-padded after the prefix: [7, 7, 5, 6, 8] and [7, 7, 1, 2, pad]; position t scores token t + 1.
    assert.deepEqual([...grouped[0].packed.ids], [7, 7, 5, 6, 8, 7, 7, 1, 2, 0]);
    assert.deepEqual([...grouped[0].positions], [2, 3, 6]);
    // At the default costs, sequences this short are not worth a group.
    assert.equal(scoringMicroBatches(sequences as never, 14, COSTS).batches.filter((mb) => mb.prefix).length, 0);
  });
});

describe('groups that pay for themselves', () => {
  // Turns whose first `shared` tokens are alike; the response starts there.
  const turn = (length: number, shared: number, sample: number) => {
    const ids = Array.from({ length }, (_, t) => (t < shared ? 1 + (t % 97) : 100 + sample * 7 + t));
    return { ids, turns: [{ sample, start: shared, length: length - shared }], responseTokens: length - shared };
  };

  test('a large group with a long common block pays; a small one, or one padded to its longest, is scored whole', () => {
    // 64 teacher-like prompts of 960 tokens opening with the same 600: two batches (34 and 30 rows) after a 599-token
    // prefix cost 2 x (3,700 + 5,000 + 599) + 64 x (130 + 361) = 50,022 against 61,440 x (1 + 3,700 / 32,768), about 68,380, whole.
    const cards = Array.from({ length: 64 }, (_, i) => turn(960, 600, i));
    const shared = scoringMicroBatches(cards as never, 32768, COSTS);
    assert.deepEqual(shared.batches.map((mb) => [mb.prefix?.length, mb.sequences.length]), [[599, 34], [599, 30]]);
    assert.equal(shared.sharedTokens, 33 * 599 + 29 * 599);
    // Eight of them save 7 x 599 = 4,193 tokens, less than a group's batch and prefix pass.
    assert.equal(scoringMicroBatches(cards.slice(0, 8) as never, 32768, COSTS).sharedTokens, 0);
    // Without those two costs, eight episodes of 500-1,900 tokens opening with the same 400, padded to 1,900 after
    // the prefix, cost 399 + 8 x (130 + 1,501) = 13,447 against 9,600 whole.
    const spread = [500, 700, 900, 1100, 1300, 1500, 1700, 1900].map((n, i) => turn(n, 400, i));
    const plan = scoringMicroBatches(spread as never, 32768, { ...COSTS, batch: 0, prefixPass: 0 });
    assert.deepEqual(plan.batches.map((mb) => [mb.prefix, mb.sequences.length]), [[undefined, 8]]);
    // The same lengths padded to none: 399 + 8 x (130 + 801) = 7,847 against 9,600 whole.
    const even = spread.map((_, i) => turn(1200, 400, i));
    assert.equal(scoringMicroBatches(even as never, 32768, { ...COSTS, batch: 0, prefixPass: 0 }).sharedTokens, 7 * 399);
  });

  test('each group is judged on the batches its caller cuts, and the others\' members go back alone', () => {
    const groups = [{ prefix: 4, members: [0, 1] }, { prefix: 4, members: [2, 3] }];
    const lengths = [10, 10, 6, 20];
    // Counting tokens only, group 0 runs 4 + 2 x 6 = 16 < 20 and stays; group 1 runs 4 + 2 x 16 = 36 > 26.
    const one = (members: readonly number[]) => [[...members]];
    assert.deepEqual(groupsThatPay({ groups, alone: [4] }, [...lengths, 3], 100, one, TOKENS_ONLY), {
      groups: [{ prefix: 4, members: [0, 1], batches: [[0, 1]] }], alone: [4, 2, 3],
    });
    // Cut into single rows, each row runs the prefix itself and neither group saves a token (20 against 20, 26 against 26).
    const rows = (members: readonly number[]) => members.map((i) => [i]);
    assert.deepEqual(groupsThatPay({ groups, alone: [] }, lengths, 100, rows, TOKENS_ONLY).alone, [0, 1, 2, 3]);
    // A prefix pass of 4 tips group 0 (20, not fewer than 20); so do rows of 2 more (4 + 2 x 8).
    assert.deepEqual(groupsThatPay({ groups, alone: [] }, lengths, 100, one, { ...TOKENS_ONLY, prefixPass: 4 }).groups, []);
    assert.deepEqual(groupsThatPay({ groups, alone: [] }, lengths, 100, one, { ...TOKENS_ONLY, row: 2 }).groups, []);
    // A batch of 10 in budgets of 100: 26 against 20 x 1.1 = 22.
    assert.deepEqual(groupsThatPay({ groups, alone: [] }, lengths, 100, one, { ...TOKENS_ONLY, batch: 10 }).groups, []);
  });
});

/** Log-probs of `seqs`' tokens from `from` on, scored whole (left-padded) and after their first `prefix` tokens run once. */
async function bothWays(model: CausalLM, seqs: number[][], prefix: number, from: number): Promise<[Float32Array, Float32Array]> {
  const spans = seqs.map((s) => [{ start: from, length: s.length - from }]);
  const whole = packLeft(seqs);
  const after = packRight(seqs.map((s) => s.slice(prefix)));
  const rest = seqs.map((s) => [{ start: from - prefix, length: s.length - from }]);
  const read = (t: { toArray(): Promise<ArrayLike<number>> }) => t.toArray().then((a) => Float32Array.from(a));
  const a = scope(() => noGrad(() => packedLogprobs(model, whole, { positions: spanPositions(whole, spans) }).logprobs));
  const b = scope(() => noGrad(() => packedLogprobs(model, after, { positions: spanPositions(after, rest), prefix: seqs[0].slice(0, prefix) }).logprobs));
  try {
    return [await read(a), await read(b)];
  } finally {
    a.dispose();
    b.dispose();
  }
}

describe('log-probs after a shared prefix', () => {
  const prefix = [3, 14, 15, 9, 26, 5, 35, 8, 9, 7];
  const seqs = [[...prefix, 1, 2, 3, 4, 5, 6], [...prefix, 11, 12], [...prefix, 21, 22, 23, 24]];

  test('Qwen2 with biases and norms: equal to the whole sequences\'', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 48, intermediate_size: 52, num_attention_heads: 3, num_key_value_heads: 1 }, 11);
    try {
      const [whole, after] = await bothWays(model, seqs, prefix.length - 1, prefix.length);
      assert.equal(whole.length, 6 + 2 + 4);
      assertClose(after, whole, { atol: 2e-5, label: 'qwen2' });
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });

  test('Qwen3.5, its recurrent state carried past the prefix', slow, async () => {
    await gpu();
    const model = loadCausalLM(new URL('./fixtures/qwen35-tiny/', import.meta.url).pathname, { trainable: false });
    try {
      const [whole, after] = await bothWays(model, seqs, 6, 8);
      assertClose(after, whole, { atol: 2e-5, label: 'qwen3.5' });
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });

  test('scoreTails (an engine scoring completions) equals the tails of the whole sequences\' log-probs', slow, async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 32, intermediate_size: 40, num_attention_heads: 2, num_key_value_heads: 1 }, 13);
    try {
      // Three share the prefix, one (the last) shares nothing; starts inside and after the prefix.
      const rows = [...seqs, [40, 41, 42, 43, 44]];
      const from = [12, 10, 11, 2];
      const tails = await scoreTails(model, rows, from, { costs: TOKENS_ONLY, maxBatchTokens: 48 });
      const whole = await scoreSequences(model, rows);
      rows.forEach((r, i) => {
        assert.equal(tails[i].length, r.length - from[i]);
        assertClose(tails[i], whole[i].subarray(from[i] - 1), { atol: 2e-5, label: `row ${i}` });
      });
      await assert.rejects(scoreTails(model, rows, [1]), /scoreTails: 1 starts for 4 sequences/);
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });

  test('refused where gradients are recorded', async () => {
    await gpu();
    const model = tinyQwen('qwen2.5-0.5b', { hidden_size: 16, intermediate_size: 20, num_attention_heads: 2, num_key_value_heads: 1 }, 12);
    try {
      const p = packRight([[1, 2, 3]]);
      assert.throws(() => scope(() => packedLogprobs(model, p, { prefix: [4, 5] })), /a shared prefix is for scoring passes without gradients/);
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });
});

describe('the teacher pass on household turns', () => {
  test('runs each shared skills block once and scores every response token as the whole prompts do', slow, async () => {
    await gpu();
    const dir = 'models/household-tiny';
    const tokenizer = await loadTokenizer(dir);
    const model = loadModel(dir, { trainable: false });
    try {
      const { samples } = await runRollout({
        env: new HouseholdEnvironment(), spec: envPlugin('household').agent, engine: new LocalEngine(model, { tokenizer }), tokenizer,
        tasks: [0, 1].map((i) => ({ split: 'train' as const, seed: 40 + i })), groupSize: 2, maxTurns: 2,
        maxPromptTokens: 1900, maxResponseTokens: 16, sampling: { temperature: 1, seed: 3 }, withSkills: 'teacher',
      });
      const sequences = teacherSequences(samples, false);
      // Eight turns are too few for a group to pay at the default costs; counting tokens only, the skills blocks are shared.
      const { batches, sharedTokens } = scoringMicroBatches(sequences, 16384, TOKENS_ONLY);
      assert.ok(batches.some((mb) => mb.prefix && mb.prefix.length > 100), `a skills block shared: ${batches.map((mb) => mb.prefix?.length ?? 0)}`);
      const total = sequences.reduce((n, q) => n + q.ids.length, 0);
      assert.ok(sharedTokens > total / 4, `${sharedTokens} of ${total} prompt tokens run once`);
      const shared = await responseLogprobs(model, samples, batches);
      const teacher = await teacherLogprobs({ kind: 'model', model }, samples, sequences, 16384);
      assert.equal(teacher.sharedTokens, scoringMicroBatches(sequences, 16384).sharedTokens);
      const whole = await responseLogprobs(model, samples, splitMicroBatches(sequences, sequences.map((_, i) => i), 16384));
      samples.forEach((s, i) => {
        assert.equal(shared[i].length, s.responseIds.length);
        const label = `sample ${i} (${s.trajectoryId} turn ${s.turn})`;
        assertClose(shared[i], whole[i], { atol: 1e-4, label });
        assertClose(teacher.logprobs[i], whole[i], { atol: 1e-4, label });
      });
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
  });
});
