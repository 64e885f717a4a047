// The matmul bench on tiny shapes: one row per (shape, kernel), each timed and checked
// against sampled f64 dot products, the launcher's own choice marked.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { benchMatmul, type MatmulShape, timeInterleaved, TRAINED } from '../src/bench/matmul.ts';
import { timePrimed } from '../src/bench/timing.ts';
import { matmul } from '../src/kernels/matmul/matmul.ts';
import { SKINNY_TILE } from '../src/kernels/matmul/tiles.ts';
import { gpu } from './support/gpu.ts';

describe('matmul bench', () => {
  test('times and checks every requested kernel on every shape', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    const shapes: MatmulShape[] = [
      { name: 'tiny forward', m: 8, n: 12, k: 16, transB: true },
      { name: 'tiny dW', m: 12, n: 16, k: 8, transA: true },
      { name: 'tiny head dX', m: 8, n: 12, k: 40, vocab: 'k' },
    ];
    const operands: string[] = [];
    const acquire = rt.pool.acquire.bind(rt.pool);
    rt.pool.acquire = (bytes, label) => {
      if (label?.startsWith('bench ')) operands.push(label);
      return acquire(bytes, label);
    };
    let rows: Record<string, unknown>[];
    try {
      rows = (await benchMatmul(rt, [32], { shapes, tiles: ['64x64/k8', SKINNY_TILE], iters: 1, sampleMs: 1, vocabChunk: 16 })) as Record<string, unknown>[];
    } finally {
      rt.pool.acquire = acquire;
    }
    // "As trained" runs on the forced tiles' operands, which hold enough for it on every
    // shape here (the vocabulary chunks are smaller), so a shape holds one set.
    assert.deepEqual(operands, Array(4).fill(['bench A', 'bench B', 'bench C']).flat());
    // The skinny path takes transB without transA only; every shape adds a row for how
    // the trainer runs it (the launcher's choices, LM-head products in vocabulary chunks).
    assert.deepEqual(rows.map((r) => `${r.name} ${r.tile}`), [
      'square 32 64x64/k8', `square 32 ${TRAINED}`, 'tiny forward 64x64/k8', `tiny forward ${SKINNY_TILE}`, `tiny forward ${TRAINED}`,
      'tiny dW 64x64/k8', `tiny dW ${TRAINED}`, 'tiny head dX 64x64/k8', `tiny head dX ${TRAINED}`,
    ]);
    assert.equal(rows.at(-1)!.vocab_chunks, 3, 'k = 40 in chunks of 16');
    for (const r of rows) {
      assert.equal(r.ok, true, `${r.name} ${r.tile}: relative error ${r.relErr}`);
      assert.ok((r.ms as number) > 0 && (r.tflops as number) > 0, `${r.name} ${r.tile}: ${r.ms} ms`);
    }
  });

  test('kernels take turns, one sample each per round, each round starting one later', async () => {
    const rt = await gpu();
    const calls: number[] = [];
    const times = await timeInterleaved(rt, [0, 1, 2].map((id) => () => void calls.push(id)), { iters: 4, sampleMs: 1 });
    assert.equal(times.length, 3);
    assert.ok(times.every((t) => t > 0), `${times}`);
    // Calls of one kernel in a row make one sample (or one calibration run).
    const runs = calls.filter((id, i) => id !== calls[i - 1]);
    assert.deepEqual(runs.slice(-15), [/* warm-up */ 0, 1, 2, /* rounds */ 0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2]);
  });

  test('a primed sample holds back the first call\'s work until the clock starts, then runs every call', async () => {
    const rt = await gpu();
    const [a, b, c] = [0, 1, 2].map(() => rt.pool.acquire(64 * 4, 'primed sample'));
    const submitsAtCall: number[] = [];
    // More dispatches a call than the runtime's first submit takes.
    const dispatches = rt.firstFlush + 2;
    const once = () => {
      submitsAtCall.push(rt.submitCount);
      for (let i = 0; i < dispatches; i++) matmul(rt, { a, b, out: c, m: 8, n: 8, k: 8, transA: false, transB: false });
    };
    await rt.sync();
    const before = rt.submitCount;
    const ms = await timePrimed(rt, once, 3);
    assert.ok(ms > 0);
    assert.equal(submitsAtCall.length, 3);
    assert.deepEqual(submitsAtCall.slice(0, 2), [before, before], 'nothing submitted while the first call was recorded');
    assert.ok(rt.submitCount > before, 'the held work went out once the clock started');
    for (const buf of [a, b, c]) rt.pool.release(buf);
  });
});
