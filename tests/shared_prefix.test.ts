// Running the prefixes sequences share once: the groups a pass finds and the batches it
// packs them into (worked by hand), the log-probs after shared prefixes of different
// lengths against the whole sequences' on Qwen2, Qwen3 and Qwen3.5 (whose Gated DeltaNet
// layers run each row's recurrence over its prefix's inputs), their parameter gradients
// (and LoRA factors') against the whole sequences' (plain and checkpointed), an engine's scoring of completions (scoreTails: a frozen teacher's
// pass), and the teacher pass on the bundled model's household turns, whose skills
// blocks it runs once, against scoring each prompt whole.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { envPlugin } from '../envs/registry.ts';
import { HouseholdEnvironment } from '../envs/household/index.ts';
import type { CausalLM } from '../src/models/causal_lm.ts';
import { loadCausalLM, loadModel } from '../src/models/load.ts';
import { attachLora, loraParameters } from '../src/lora/lora.ts';
import { packLeft, packPlanned, packedLogprobs, scoreSequences, scoreTails, spanPositions } from '../src/scoring/score.ts';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import { gpuOptions } from '../src/cli/gpu_args.ts';
import { packGroups, planCost, planSharedPrefixes, sharedPrefixGroups, type PlannedBatch } from '../src/scoring/shared_prefix.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { backward, noGrad, requireGrad, zeroGrad } from '../src/tensor/autograd.ts';
import { mul, sum } from '../src/tensor/ops/index.ts';
import { scope, scopeAsync } from '../src/tensor/scope.ts';
import { tensor, type Tensor } from '../src/tensor/tensor.ts';
import { teacherLogprobs, teacherSequences } from '../src/trainer/teacher.ts';
import { responseLogprobs, sharedPrefixMicroBatches, splitMicroBatches } from '../src/trainer/update.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const slow = { timeout: 600_000 };
/** The runtime's default costs, and costs of nothing but tokens: every group that saves a token is taken. */
const COSTS = kernelPolicy().scoring;
const TOKENS_ONLY = { sharePrefixes: true, batch: 0, group: 0 };
const fixture = (name: string) => new URL(`./fixtures/${name}/`, import.meta.url).pathname;

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
    const shared = sharedPrefixMicroBatches(sequences as never, 14, { costs: TOKENS_ONLY });
    const grouped = shared.batches.filter((mb) => mb.prefixes);
    // Rows of 7 and 6 tokens fill 14 two at a time: [2, 0], then [1]; each runs [7, 7]. Whole, [2, 0] and [1, 3] cost
    // 14 + 10 tokens; shared, 2 + 2 x 5 and 2 + 3, and [3] alone 2: 19.
    assert.deepEqual(grouped.map((mb) => [[...mb.prefixes!.ids], mb.sequences]), [[[7, 7], [2, 0]], [[7, 7], [1]]]);
    assert.equal(shared.sharedTokens, 2);
    assert.deepEqual(shared.batches.filter((mb) => !mb.prefixes).map((mb) => mb.sequences), [[3]]);
    // Right-padded after the prefix: [7, 7, 5, 6, 8] and [7, 7, 1, 2, pad]; position t scores token t + 1.
    assert.deepEqual([...grouped[0].packed.ids], [7, 7, 5, 6, 8, 7, 7, 1, 2, 0]);
    assert.deepEqual([...grouped[0].positions], [2, 3, 6]);
    // Only the given indices are planned; at the default costs, sequences this short are not worth a group.
    assert.deepEqual(sharedPrefixMicroBatches(sequences as never, 14, { costs: TOKENS_ONLY, indices: [1, 3] }).batches.map((mb) => [mb.sequences, !!mb.prefixes]), [[[1, 3], false]]);
    assert.equal(sharedPrefixMicroBatches(sequences as never, 14, { costs: COSTS }).batches.filter((mb) => mb.prefixes).length, 0);
  });
});

describe('packing groups into batches', () => {
  test('longest prefix first, several groups to a batch, every row counting its batch\'s longest prefix and rest', () => {
    // Group B (prefix 6) rows 3 (12 tokens: rest 6) and 2 (9: 3) take 2 x (6 + 6) = 24 of 40; group A's row 0 (10: rest 6)
    // makes 3 x 12 = 36; row 1 (8: 4) would make 48, so it opens the next batch, which runs A's prefix again.
    const groups = [{ prefix: 4, members: [0, 1] }, { prefix: 6, members: [2, 3] }];
    const lengths = [10, 8, 9, 12];
    const batches = packGroups(groups, lengths, 40);
    assert.deepEqual(batches, [
      { rows: [3, 2, 0], prefixes: [{ length: 6, rows: 2 }, { length: 4, rows: 1 }] },
      { rows: [1], prefixes: [{ length: 4, rows: 1 }] },
    ]);
    // A batch of 10: 10 + 2 prefixes x 6 + 3 rows x 6, and 10 + 4 + 4; the four whole in one batch, 10 + 4 x 12.
    assert.equal(planCost(batches, lengths, { batch: 10 }), 40 + 18);
    assert.equal(planCost([{ rows: [0, 1, 2, 3] }], lengths, { batch: 10 }), 58);
  });

  /** `n` sequences opening with `prefix` tokens alike (ids from `base`), the response after them. */
  const family = (base: number, prefix: number, lengths: readonly number[]) => lengths.map((length) => Array.from({ length }, (_, t) => (t < prefix ? base + (t % 50) : 1000 + t)));
  const plan = (seqs: number[][], starts: number[], budget: number) =>
    planSharedPrefixes(seqs, seqs.map((_, i) => i), starts.map((s) => s - 1), budget, (ix) => (ix.length ? [[...ix].sort((a, b) => seqs[b].length - seqs[a].length)] : []), COSTS);

  test('a GRPO iteration\'s groups: each prompt runs once for its completions', () => {
    // Four prompts of 400 tokens, eight completions of 256 each: shared, one batch of 4 x 399 prefix tokens and 32 rows of
    // 257 costs 3,700 + 1,596 + 8,224 = 13,520 against 3,700 + 32 x 656 = 24,692 whole.
    const seqs = [0, 1, 2, 3].flatMap((g) => family(100 * (g + 1), 400, new Array(8).fill(656)));
    const { batches, sharedTokens } = plan(seqs, seqs.map(() => 400), 32768);
    assert.equal(batches.length, 1);
    assert.deepEqual(batches[0].prefixes, [0, 1, 2, 3].map(() => ({ length: 399, rows: 8 })));
    assert.equal(sharedTokens, 4 * 7 * 399);
    assert.equal(planCost(batches, seqs.map((s) => s.length), COSTS), 13520);
  });

  test('a plan that costs no less than the whole sequences is dropped', () => {
    // A: two of 1,010 sharing 1,000; B: two of 1,300 sharing 300. Shared, one batch pads B's prefixes to A's and its rows
    // to B's rests: 3,700 + 2 x 999 + 4 x 1,001 = 9,702 against 3,700 + 4 x 1,300 = 8,900 whole.
    const seqs = [...family(100, 1000, [1010, 1010]), ...family(200, 300, [1300, 1300])];
    const starts = [1000, 1000, 300, 300];
    const groups = sharedPrefixGroups(seqs, [0, 1, 2, 3], starts.map((s) => s - 1), COSTS.group).groups;
    assert.deepEqual(groups.map((g) => g.prefix), [999, 299]);
    assert.equal(planCost(packGroups(groups, seqs.map((s) => s.length), 32768), seqs.map((s) => s.length), COSTS), 9702);
    assert.deepEqual(plan(seqs, starts, 32768), { batches: [{ rows: [2, 3, 0, 1] }], sharedTokens: 0 });
    // B alone pays: 3,700 + 299 + 2 x 1,001 = 6,001 against 3,700 + 2,600.
    assert.equal(plan(seqs.slice(2), starts.slice(2), 32768).sharedTokens, 299);
  });

  test('--shared-prefixes off: every sequence whole, whatever it would save', () => {
    assert.deepEqual(gpuOptions({ 'shared-prefixes': 'off' }).policy?.scoring, { sharePrefixes: false });
    assert.equal(gpuOptions({}).policy?.scoring, undefined);
    assert.throws(() => gpuOptions({ 'shared-prefixes': 'yes' }), /--shared-prefixes must be on or off, got "yes"/);
    const seqs = [0, 1].flatMap((g) => family(100 * (g + 1), 400, new Array(8).fill(656)));
    const off = planSharedPrefixes(seqs, seqs.map((_, i) => i), seqs.map(() => 399), 32768, (ix) => [[...ix]], { ...COSTS, sharePrefixes: false });
    assert.deepEqual(off, { batches: [{ rows: seqs.map((_, i) => i) }], sharedTokens: 0 });
  });
});

/**
 * Sequences of three families (prefixes of 10, 6 and 3 tokens, the last a family of one
 * row), and the batch that runs their prefixes once, each up to the token before `from`.
 */
const prefixes = [[3, 14, 15, 9, 26, 5, 35, 8, 9, 7], [40, 41, 42, 43, 44, 45], [60, 61, 62]];
const seqs = [
  [...prefixes[0], 1, 2, 3, 4, 5, 6], [...prefixes[0], 11, 12],
  [...prefixes[1], 21, 22, 23, 24], [...prefixes[1], 50, 51, 52],
  [...prefixes[2], 70, 71, 72, 73, 74, 75, 76],
];
const from = [10, 10, 6, 6, 3];
const sharedBatch: PlannedBatch = { rows: [0, 1, 2, 3, 4], prefixes: [{ length: 9, rows: 2 }, { length: 5, rows: 2 }, { length: 2, rows: 1 }] };

/** Log-probs of each sequence's tokens from `from` on, whole (left-padded) or after the shared prefixes. */
function logprobsOf(model: CausalLM, shared: boolean): Tensor {
  if (!shared) {
    const whole = packLeft(seqs);
    return packedLogprobs(model, whole, { positions: spanPositions(whole, seqs.map((s, i) => [{ start: from[i], length: s.length - from[i] }])) }).logprobs;
  }
  const { packed, prefixes: p, cut } = packPlanned(seqs, sharedBatch);
  const positions = spanPositions(packed, seqs.map((s, i) => [{ start: from[i] - cut[i], length: s.length - from[i] }]));
  return packedLogprobs(model, packed, { positions, prefixes: p }).logprobs;
}

async function bothWays(model: CausalLM): Promise<[Float32Array, Float32Array]> {
  const a = scope(() => noGrad(() => logprobsOf(model, false)));
  const b = scope(() => noGrad(() => logprobsOf(model, true)));
  try {
    return [await read(a), await read(b)];
  } finally {
    a.dispose();
    b.dispose();
  }
}

/** Gradients of a fixed mix of the log-probs (so every token weighs differently), whole or shared. */
async function gradients(model: CausalLM, params: readonly Tensor[], shared: boolean): Promise<Float32Array[]> {
  return scopeAsync(async () => {
    zeroGrad(params);
    const lp = logprobsOf(model, shared);
    backward(sum(mul(lp, tensor(Float32Array.from({ length: lp.size }, (_, i) => 0.5 + ((i * 7) % 5) / 4)))));
    const grads = await Promise.all(params.map((p) => read(p.grad!)));
    zeroGrad(params);
    return grads;
  });
}

describe('log-probs after shared prefixes', () => {
  test('the batch: prefixes of 9, 5 and 2 tokens left-padded, each row right-padded after its own', () => {
    const { packed, prefixes: p, cut } = packPlanned(seqs, sharedBatch);
    assert.deepEqual([p!.batch, p!.seq, [...p!.padLeft], [...p!.of]], [3, 9, [0, 4, 7], [0, 0, 1, 1, 2]]);
    assert.deepEqual([...p!.ids.subarray(9, 18)], [0, 0, 0, 0, 40, 41, 42, 43, 44]);
    assert.deepEqual(cut, [9, 9, 5, 5, 2]);
    assert.deepEqual([packed.batch, packed.seq], [5, 8]);
    assert.deepEqual([...packed.ids.subarray(8, 16)], [7, 11, 12, 0, 0, 0, 0, 0]);
    assert.throws(() => packPlanned(seqs, { rows: [0, 1], prefixes: [{ length: 9, rows: 3 }] }), /prefixes of 3 rows for a batch of 2/);
  });

  for (const name of ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny']) {
    test(`${name}: equal to the whole sequences'`, slow, async () => {
      await gpu();
      const model = loadCausalLM(fixture(name), { trainable: false });
      try {
        const [whole, after] = await bothWays(model);
        assert.equal(whole.length, 6 + 2 + 4 + 3 + 7);
        assertClose(after, whole, { atol: 2e-5, label: name });
      } finally {
        for (const p of model.parameters()) p.dispose();
      }
    });
  }

  for (const name of ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny']) {
    test(`${name}: gradients through shared prefixes equal the whole sequences', plain and checkpointed`, slow, async () => {
      await gpu();
      const model = loadCausalLM(fixture(name));
      const params = model.parameters();
      for (const p of params) requireGrad(p);
      try {
        const whole = await gradients(model, params, false);
        assert.ok(whole.every((g) => g.some((v) => v !== 0)), 'every parameter has a gradient');
        for (const checkpoint of [false, true]) {
          model.checkpointLayers = checkpoint;
          const shared = await gradients(model, params, true);
          whole.forEach((g, i) => assertClose(shared[i], g, { atol: 2e-5, rtol: 1e-4, label: `${[...model.params.keys()][i]}${checkpoint ? ' (checkpointed)' : ''}` }));
        }
      } finally {
        for (const p of params) p.dispose();
      }
    });
  }

  test('LoRA factors get the whole sequences\' gradients through shared prefixes (frozen base)', slow, async () => {
    await gpu();
    const model = loadCausalLM(fixture('qwen3-tiny'), { trainable: false });
    attachLora(model, { r: 2, alpha: 4, targetModules: ['q_proj', 'k_proj', 'v_proj', 'down_proj'], baseModel: null }, 1);
    // B starts at zero; move it so the A factors get gradients too.
    for (const b of [...model.lora.values()].map((l) => l.b)) b.storage.rt.upload(b.buffer, 0, new Float32Array(b.size).fill(0.01));
    const params = loraParameters(model);
    for (const p of params) requireGrad(p);
    try {
      const whole = await gradients(model, params, false);
      assert.ok(whole.every((g) => g.some((v) => v !== 0)), 'every factor has a gradient');
      for (const checkpoint of [false, true]) {
        model.checkpointLayers = checkpoint;
        const shared = await gradients(model, params, true);
        whole.forEach((g, i) => assertClose(shared[i], g, { atol: 1e-6, rtol: 1e-4, label: `factor ${i}${checkpoint ? ' (checkpointed)' : ''}` }));
      }
    } finally {
      for (const p of [...model.parameters(), ...params]) p.dispose();
    }
  });

  test('scoreTails (an engine scoring completions) equals the tails of the whole sequences\' log-probs', slow, async () => {
    await gpu();
    const model = loadCausalLM(fixture('qwen2-tiny'), { trainable: false });
    try {
      // Two families share prefixes, one sequence shares nothing; starts inside and after the prefixes.
      const rows = [...seqs.slice(0, 4), [80, 81, 82, 83, 84]];
      const starts = [12, 10, 7, 6, 2];
      const tails = await scoreTails(model, rows, starts, { costs: TOKENS_ONLY, maxBatchTokens: 48 });
      const whole = await scoreSequences(model, rows);
      rows.forEach((r, i) => {
        assert.equal(tails[i].length, r.length - starts[i]);
        assertClose(tails[i], whole[i].subarray(starts[i] - 1), { atol: 2e-5, label: `row ${i}` });
      });
      await assert.rejects(scoreTails(model, rows, [1]), /scoreTails: 1 starts for 5 sequences/);
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
      const { batches, sharedTokens } = sharedPrefixMicroBatches(sequences, 16384);
      assert.ok(batches.some((mb) => mb.prefixes && mb.prefixes.seq > 100), `a skills block shared: ${batches.map((mb) => mb.prefixes?.seq ?? 0)}`);
      const total = sequences.reduce((n, q) => n + q.ids.length, 0);
      assert.ok(sharedTokens > total / 4, `${sharedTokens} of ${total} prompt tokens run once`);
      const shared = await responseLogprobs(model, samples, batches);
      const teacher = await teacherLogprobs({ kind: 'model', model }, samples, sequences, 16384);
      assert.equal(teacher.sharedTokens, sharedTokens);
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
