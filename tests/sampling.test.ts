import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as sk from '../src/kernels/sampling.ts';
import * as ref from '../src/reference/sampling.ts';
import { deriveSeed, randn, uniformAt } from '../src/util/random.ts';
import { linear } from '../src/tensor/ops/matmul.ts';
import { decodeRows, disposeDecodeRows, finishDecodeRows, readSteps, readTokenRanks, sampleNext, sampleStep, takeDecodeRows, tokenRanks, type DecodeRowState, type RowSampling } from '../src/tensor/ops/sampling.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { empty, tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu } from './support/gpu.ts';

// The software GPU is slow and shared: GPU tests get more than the runner's 5 s default.
const slow = { timeout: 120_000 };

function logitsFor(rows: number, vocab: number, seed: number, scale = 2): Float32Array {
  return randn(rows * vocab, seed, scale);
}

describe('sampling kernel', () => {
  test('candidates, draws and log-probs match the CPU reference (temperature, top-k, top-p, greedy)', slow, async () => {
    await gpu();
    const settings: Omit<RowSampling, 'u'>[] = [
      { temperature: 1, topP: 1, topK: 0 },
      { temperature: 0.7, topP: 1, topK: 5 },
      { temperature: 1.3, topP: 0.8, topK: -1 },
      { temperature: 1, topP: 0.5, topK: 40 },
      { temperature: 0.25, topP: 0.95, topK: 3 },
      { temperature: 0, topP: 0.3, topK: 2 },
      { temperature: 2, topP: 0.05, topK: 0 },
      { temperature: 1, topP: 1, topK: 1 },
      { temperature: 1e-6, topP: 1, topK: 0 },
    ];
    for (const vocab of [7, 37, 300, 1031]) {
      const rows: RowSampling[] = [];
      for (let i = 0; i < 40; i++) rows.push({ ...settings[i % settings.length], u: uniformAt(vocab, i) });
      const logits = logitsFor(rows.length, vocab, vocab);
      const got = await scopeAsync(() => sampleNext(tensor(logits, [rows.length, vocab]), rows));
      const want = ref.sample(logits, vocab, rows, sk.GREEDY_BELOW);
      let compared = 0;
      want.forEach((w, i) => {
        const where = `vocab ${vocab} row ${i} ${JSON.stringify(rows[i])}`;
        // A top-p sum within float rounding of p may land on either side; such rows are skipped.
        if (w.topPMargin < 1e-4) return;
        assert.equal(got.thresholds[i], w.threshold, `${where}: candidate threshold`);
        if (w.drawMargin < 1e-4) return;
        assert.equal(got.ids[i], w.id, `${where}: sampled id`);
        assertClose([got.logprobs[i]], [w.logprob], { atol: 2e-5, rtol: 1e-5, label: `${where}: log-prob` });
        compared++;
      });
      assert.ok(compared >= 36, `vocab ${vocab}: only ${compared} rows away from rounding edges`);
    }
  });

  test('top-k keeps every tie of the k-th value; greedy takes the first maximum', slow, async () => {
    await gpu();
    const x = Float32Array.from([0.5, 2, -1, 2, 1, 2, 0]);
    const rows: RowSampling[] = [
      { temperature: 1, topP: 1, topK: 2, u: 0.99 },
      { temperature: 0, topP: 1, topK: 0, u: 0.5 },
    ];
    const logits = new Float32Array(14);
    logits.set(x);
    logits.set(x, 7);
    const got = await scopeAsync(() => sampleNext(tensor(logits, [2, 7]), rows));
    assert.equal(got.thresholds[0], ref.floatKey(2));
    assert.equal(got.ids[0], 5, 'u = 0.99 lands on the last of the three tied maxima');
    assertClose([got.logprobs[0]], [ref.sampleRow(x, rows[0], sk.GREEDY_BELOW).logprob]);
    assert.equal(got.ids[1], 1);
  });

  test('draws follow the filtered distribution (chi-square over 3000 seeded draws)', slow, async () => {
    await gpu();
    const x = Float32Array.from([1.2, 0.3, -0.4, 2.0, 0.9, -2.5, 1.6]);
    for (const s of [{ temperature: 1, topP: 1, topK: 0 }, { temperature: 0.8, topP: 0.9, topK: 5 }, { temperature: 1.5, topP: 1, topK: 3 }]) {
      const n = 3000;
      const rows = Array.from({ length: n }, (_, i) => ({ ...s, u: uniformAt(deriveSeed(11, i), 0) }));
      const logits = new Float32Array(n * 7);
      for (let i = 0; i < n; i++) logits.set(x, i * 7);
      const got = await scopeAsync(() => sampleNext(tensor(logits, [n, 7]), rows));
      const probs = ref.sampleRow(x, { ...s, u: 0 }, sk.GREEDY_BELOW).probs;
      const counts = new Array(7).fill(0);
      for (const id of got.ids) counts[id]++;
      let chi2 = 0;
      let cells = 0;
      for (let v = 0; v < 7; v++) {
        if (probs[v] === 0) {
          assert.equal(counts[v], 0, `${JSON.stringify(s)}: token ${v} is filtered out but was drawn ${counts[v]} times`);
          continue;
        }
        chi2 += (counts[v] - n * probs[v]) ** 2 / (n * probs[v]);
        cells++;
      }
      // 99.9th percentile of chi-square with cells - 1 <= 6 degrees of freedom is at most 22.5.
      assert.ok(chi2 < 22.5, `${JSON.stringify(s)}: chi-square ${chi2.toFixed(2)} over ${cells} cells, counts ${counts}`);
    }
  });

  test('token_stats: log-prob and rank of targets per block of rows', slow, async () => {
    await gpu();
    const vocab = 301;
    const rows = 9;
    const logits = logitsFor(rows, vocab, 5);
    logits[2 * vocab + 17] = logits[2 * vocab + 4];
    const targets = Int32Array.from({ length: rows }, (_, i) => (i * 37 + 4) % vocab);
    for (const temperature of [1, 0.6]) {
      const want = ref.tokenStats(logits, vocab, targets, temperature);
      await scopeAsync(async () => {
        const rt = await gpu();
        const t = tensor(targets, [rows], 'i32');
        const out = empty([2 * rows], 'u32');
        // Two blocks, as the prompt scorer runs them: rows 0..3 and 4..8.
        for (const [r0, r1] of [[0, 4], [4, rows]]) {
          const block = tensor(logits.subarray(r0 * vocab, r1 * vocab), [r1 - r0, vocab]);
          sk.tokenStats(rt, block.buffer, t.buffer, out.buffer, { rows: r1 - r0, vocab, row0: r0, total: rows, invT: 1 / temperature });
        }
        const bytes = (await out.toArray()).buffer as ArrayBuffer;
        assertClose(new Float32Array(bytes, 0, rows), want.logprobs, { atol: 2e-5, rtol: 1e-5, label: `log-probs at T ${temperature}` });
        assert.deepEqual([...new Uint32Array(bytes, 4 * rows, rows)], [...want.ranks]);
      });
    }
  });

  test('top-n lists match the CPU reference: largest logits first, ties by smaller id, log-probs of the sampling distribution', slow, async () => {
    await gpu();
    const settings: Omit<RowSampling, 'u'>[] = [
      { temperature: 1, topP: 1, topK: 0, topN: 5 },
      { temperature: 0, topP: 1, topK: 0, topN: 3 },
      { temperature: 0.7, topP: 0.9, topK: 20, topN: 1 },
      { temperature: 1.3, topP: 1, topK: 0 },
      { temperature: 1, topP: 1, topK: 0, topN: 20 },
    ];
    for (const vocab of [7, 300, 1031]) {
      const rows = Array.from({ length: 11 }, (_, i) => ({ ...settings[i % settings.length], u: uniformAt(vocab + 1, i) }));
      const logits = logitsFor(rows.length, vocab, vocab + 1);
      // Ties: row 0 repeats its largest logit at a later and an earlier index.
      let top = 0;
      for (let i = 1; i < vocab; i++) if (logits[i] > logits[top]) top = i;
      logits[vocab - 1] = logits[top];
      logits[0] = logits[top];
      const got = await scopeAsync(() => sampleNext(tensor(logits, [rows.length, vocab]), rows));
      assert.equal(got.topN, Math.min(20, vocab));
      ref.sample(logits, vocab, rows, sk.GREEDY_BELOW).forEach((w, r) => {
        const n = Math.min(rows[r].topN ?? 0, vocab);
        const where = `vocab ${vocab} row ${r} ${JSON.stringify(rows[r])}`;
        assert.deepEqual([...got.topIds.subarray(r * got.topN, r * got.topN + n)], w.top.map((t) => t.id), `${where}: top ids`);
        assertClose(got.topLogprobs.subarray(r * got.topN, r * got.topN + n), w.top.map((t) => t.logprob), { atol: 2e-5, rtol: 1e-5, label: `${where}: top log-probs` });
        if (n > 0 && got.ids[r] === w.top[0].id) assertClose([got.logprobs[r]], [w.top[0].logprob], { atol: 1e-6, label: `${where}: sampled and listed log-probs agree` });
      });
      const tied = [...new Set([0, top, vocab - 1])].sort((a, b) => a - b);
      assert.deepEqual([...got.topIds.subarray(0, tied.length)], tied, `vocab ${vocab}: tied maxima in id order`);
    }
    const none = await scopeAsync(() => sampleNext(tensor(logitsFor(2, 9, 3), [2, 9]), [{ temperature: 1, topP: 1, topK: 0, u: 0.5 }, { temperature: 0, topP: 1, topK: 0, u: 0 }]));
    assert.equal(none.topN, 0);
    assert.equal(none.topIds.length, 0);
  });

  test('tokenRanks: log-prob and rank of targets from hidden states and the LM head, block by block', slow, async () => {
    await gpu();
    const [n, h, vocab] = [9, 12, 301];
    const hidden = randn(n * h, 21, 1);
    const weight = randn(vocab * h, 22, 0.5);
    const targets = Int32Array.from({ length: n }, (_, i) => (i * 37 + 4) % vocab);
    for (const temperature of [1, 0.6]) {
      await scopeAsync(async () => {
        const hT = tensor(hidden, [n, h]);
        const wT = tensor(weight, [vocab, h]);
        const logits = (await linear(hT, wT).toArray()) as Float32Array;
        const want = ref.tokenStats(logits, vocab, targets, temperature);
        // 4 rows of logits per block: three blocks, the last one short.
        const got = await readTokenRanks(tokenRanks(hT, wT, targets, { temperature, blockBytes: 4 * 4 * vocab }));
        assertClose(got.logprobs, want.logprobs, { atol: 2e-5, rtol: 1e-5, label: `log-probs at T ${temperature}` });
        assert.deepEqual([...got.ranks], [...want.ranks]);
      });
    }
  });

  test('sample_step draws the uniform of (seed, count) on the GPU bit for bit: equal logits expose its top 12 bits', slow, async () => {
    await gpu();
    // With every logit equal the mass is the vocabulary size exactly and u * 4096 is
    // exact, so the drawn id is floor(u * 4096).
    const vocab = 4096;
    const seeds = [0, 1, 7, -1, -123456789, 2 ** 32, 2 ** 32 + 5, 2 ** 53 - 1, -(2 ** 53) + 1, 987654321012];
    const rows: DecodeRowState[] = seeds.map((seed, i) => ({ temperature: 1, topP: 1, topK: 0, seed, produced: i, maxTokens: 100, stopIds: [], done: false }));
    const steps = 5;
    const got = await scopeAsync(async () => {
      const d = decodeRows(rows, { ids: new Int32Array(rows.length), positions: new Int32Array(rows.length) }, vocab, steps);
      try {
        const logits = tensor(new Float32Array(rows.length * vocab), [rows.length, vocab]);
        for (let j = 0; j < steps; j++) sampleStep(logits, d, j);
        return await readSteps(d, steps);
      } finally {
        disposeDecodeRows(d);
      }
    });
    got.forEach((step, j) => rows.forEach((r, i) => {
      assert.equal(step.ids[i], Math.floor(uniformAt(r.seed, r.produced + j) * vocab), `seed ${r.seed}, draw ${r.produced + j}`);
    }));
  });

  test('sample_step over several steps matches the CPU reference: draws, log-probs, stop ids, max tokens, done rows write nothing', slow, async () => {
    await gpu();
    const vocab = 97;
    const steps = 6;
    const settings: Omit<DecodeRowState, 'seed' | 'produced' | 'done'>[] = [
      { temperature: 1, topP: 1, topK: 0, maxTokens: 50, stopIds: [] },
      { temperature: 0.7, topP: 0.9, topK: 10, maxTokens: 3, stopIds: [] },
      { temperature: 0, topP: 1, topK: 0, maxTokens: 50, stopIds: [], topN: 3 },
      { temperature: 1.2, topP: 1, topK: 4, maxTokens: 50, stopIds: [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30] },
      { temperature: 1, topP: 0.5, topK: 0, maxTokens: 50, stopIds: [3], topN: 2 },
    ];
    const rows: DecodeRowState[] = Array.from({ length: 13 }, (_, i) => ({ ...settings[i % settings.length], seed: 1000 + i, produced: i % 3, done: i === 12 }));
    const logits = logitsFor(steps * rows.length, vocab, 77);
    const got = await scopeAsync(async () => {
      const d = decodeRows(rows, { ids: new Int32Array(rows.length).fill(1), positions: Int32Array.from(rows, (_, i) => 10 * i) }, vocab, steps);
      try {
        for (let j = 0; j < steps; j++) sampleStep(tensor(logits.subarray(j * rows.length * vocab, (j + 1) * rows.length * vocab), [rows.length, vocab]), d, j);
        const record = await readSteps(d, steps);
        return { record, state: new Uint32Array((await d.state.toArray()).buffer as ArrayBuffer), ids: [...(await d.ids.toArray())], positions: [...(await d.positions.toArray())] };
      } finally {
        disposeDecodeRows(d);
      }
    });
    const refRows: ref.DecodeRowRef[] = rows.map((r) => ({ ...r, uniform: (t: number) => uniformAt(r.seed, t) }));
    // Rows whose draw lands within rounding of a CDF edge may differ; they are followed no further.
    const lost = new Set<number>();
    const lastIds = new Array(rows.length).fill(1);
    let compared = 0;
    let finished = 0;
    for (let j = 0; j < steps; j++) {
      const wasDone = refRows.map((r) => r.done);
      const want = ref.decodeStep(logits.subarray(j * rows.length * vocab, (j + 1) * rows.length * vocab), vocab, refRows, sk.GREEDY_BELOW);
      const step = got.record[j];
      want.forEach((w, i) => {
        if (!w || lost.has(i)) return;
        if (w.drawMargin < 1e-4 || w.topPMargin < 1e-4) {
          lost.add(i);
          return;
        }
        const where = `step ${j} row ${i}`;
        assert.equal(step.ids[i], w.id, `${where}: id`);
        assertClose([step.logprobs[i]], [w.logprob], { atol: 2e-5, rtol: 1e-5, label: `${where}: log-prob` });
        const n = Math.min(rows[i].topN ?? 0, vocab);
        assert.deepEqual([...step.topIds.subarray(i * step.topN, i * step.topN + n)], w.top.map((t) => t.id), `${where}: top ids`);
        lastIds[i] = w.id;
        compared++;
        if (!wasDone[i] && refRows[i].done) finished++;
      });
    }
    assert.ok(compared >= 50, `only ${compared} row-steps compared`);
    assert.ok(finished >= 4, `only ${finished} rows finished within the steps`);
    const words = sk.DECODE_ROW_BYTES / 4;
    refRows.forEach((r, i) => {
      if (lost.has(i)) return;
      assert.equal(got.state[i * words + 6], r.produced, `row ${i}: produced`);
      assert.equal(got.state[i * words + 10], Number(r.done), `row ${i}: done`);
      assert.equal(got.ids[i], lastIds[i], `row ${i}: the next step's id`);
    });
    assert.equal(got.state[12 * words + 6], rows[12].produced, 'a row done from the start is not counted');
    assert.deepEqual(got.positions, rows.map((_, i) => 10 * i + steps), 'every row, done or not, advances its position each step');
  });

  test('rows taken on the GPU behind unread steps keep their progress; a row the host finishes samples no more', slow, async () => {
    await gpu();
    // Equal logits: the drawn id is floor(u * 4096), so each id names its draw's count.
    const vocab = 4096;
    const rows: DecodeRowState[] = [0, 1, 2, 3, 4].map((i) => ({ temperature: 1, topP: 1, topK: 0, seed: 50 + i, produced: 0, maxTokens: 100, stopIds: [], done: false }));
    const drawn = (row: number, t: number) => Math.floor(uniformAt(rows[row].seed, t) * vocab);
    const taken = [3, 1, 4];
    const got = await scopeAsync(async () => {
      const logits = tensor(new Float32Array(rows.length * vocab), [rows.length, vocab]);
      const d = decodeRows(rows, { ids: new Int32Array(rows.length), positions: Int32Array.from(rows, (_, i) => 10 * i) }, vocab, 2);
      for (let j = 0; j < 2; j++) sampleStep(logits, d, j);
      // Nothing read back: the copies follow the steps in the queue.
      const e = takeDecodeRows(d, taken);
      disposeDecodeRows(d);
      try {
        finishDecodeRows(e, [1]);
        const fewer = tensor(new Float32Array(taken.length * vocab), [taken.length, vocab]);
        for (let j = 0; j < 2; j++) sampleStep(fewer, e, j);
        const record = await readSteps(e, 2);
        return { record, state: new Uint32Array((await e.state.toArray()).buffer as ArrayBuffer), ids: [...(await e.ids.toArray())], positions: [...(await e.positions.toArray())] };
      } finally {
        disposeDecodeRows(e);
      }
    });
    const words = sk.DECODE_ROW_BYTES / 4;
    for (const i of [0, 2]) {
      got.record.forEach((step, j) => assert.equal(step.ids[i], drawn(taken[i], 2 + j), `row ${taken[i]}, draw ${2 + j}`));
      assert.equal(got.state[i * words + 6], 4, `row ${taken[i]}: produced`);
      assert.equal(got.ids[i], drawn(taken[i], 3));
    }
    assert.equal(got.state[words + 6], 2, 'a finished row counts no more draws');
    assert.equal(got.state[words + sk.DONE_WORD], 1);
    assert.equal(got.ids[1], drawn(1, 1), 'a finished row keeps its last id');
    assert.deepEqual(got.positions, taken.map((i) => 10 * i + 4), 'positions advance behind and after the copy');
  });

  test('bad input is refused with the op and the shapes named', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(new Float32Array(6), [2, 3]);
      const row = { temperature: 1, topP: 1, topK: 0, u: 0.5 };
      await assert.rejects(sampleNext(x, [row]), /sampleTokens: 1 sampling rows for logits \[2, 3\]/);
      await assert.rejects(sampleNext(tensor(new Float32Array(6), [6]), [row]), /sampleTokens: logits \[6\] are not \[rows, vocab\]/);
      await assert.rejects(sampleNext(x, [row, { ...row, topP: 0 }]), /row 1: top_p must be in \(0, 1\]/);
      await assert.rejects(sampleNext(x, [row, { ...row, u: 1 }]), /row 1: u must be in \[0, 1\)/);
      await assert.rejects(sampleNext(x, [row, { ...row, topN: -2 }]), /row 1: topN must be an integer >= 0/);
      const dr: DecodeRowState = { temperature: 1, topP: 1, topK: 0, seed: 1, produced: 0, maxTokens: 4, stopIds: [2], done: false };
      const two = { ids: new Int32Array(2), positions: new Int32Array(2) };
      assert.throws(() => decodeRows([dr, { ...dr, stopIds: [3] }], two, 3, 2), /decodeRows: row 1: stop id 3 is not a token id in \[0, 3\)/);
      assert.throws(() => decodeRows([dr, { ...dr, seed: 0.5 }], two, 3, 2), /decodeRows: row 1: seed must be a safe integer, got 0.5/);
      assert.throws(() => decodeRows([dr], two, 3, 2), /decodeRows: 2 ids and 2 positions for 1 rows/);
      const d = decodeRows([dr, dr], two, 3, 2);
      try {
        assert.throws(() => sampleStep(tensor(new Float32Array(8), [2, 4]), d, 0), /sampleStep: logits \[2, 4\] are not \[2, 3\]/);
        assert.throws(() => sampleStep(x, d, 2), /sampleStep: slot 2 is not in \[0, 2\)/);
        await assert.rejects(readSteps(d, 3), /readSteps: steps 3 is not in \[1, 2\]/);
        assert.throws(() => takeDecodeRows(d, []), /takeDecodeRows: no rows/);
        assert.throws(() => takeDecodeRows(d, [0, 2]), /takeRows: rows\[1\] = 2 is not a row of \[2, 12\]/);
        assert.throws(() => finishDecodeRows(d, [2]), /finishDecodeRows: row 2 is not in \[0, 2\)/);
      } finally {
        disposeDecodeRows(d);
      }
      assert.throws(() => tokenRanks(tensor(new Float32Array(6), [2, 3]), tensor(new Float32Array(8), [2, 4]), [0, 1]), /tokenRanks: hidden \[2, 3\] and weight \[2, 4\]/);
      assert.throws(() => tokenRanks(tensor(new Float32Array(6), [2, 3]), tensor(new Float32Array(6), [2, 3]), [0, 2]), /tokenRanks: target 2 at position 1 is outside the vocabulary \[0, 2\)/);
    });
  });
});

describe('seeded uniforms', () => {
  test('depend only on (seed, step), spread over [0, 1), and derived seeds differ', () => {
    assert.equal(uniformAt(42, 7), uniformAt(42, 7));
    assert.notEqual(uniformAt(42, 7), uniformAt(42, 8));
    assert.notEqual(uniformAt(42, 7), uniformAt(43, 7));
    assert.notEqual(uniformAt(2 ** 40 + 1, 0), uniformAt(1, 0));
    const bins = new Array(10).fill(0);
    for (let i = 0; i < 10000; i++) {
      const u = uniformAt(i % 97, Math.floor(i / 97));
      assert.ok(u >= 0 && u < 1);
      bins[Math.floor(u * 10)]++;
    }
    for (const b of bins) assert.ok(Math.abs(b - 1000) < 150, `bins ${bins}`);
    assert.equal(deriveSeed(5, 0), 5);
    const derived = new Set([0, 1, 2, 3].map((i) => deriveSeed(5, i)));
    assert.equal(derived.size, 4);
    for (const d of derived) assert.ok(Number.isSafeInteger(d) && d >= 0);
  });
});
