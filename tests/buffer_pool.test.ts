// The buffer pool under a budget (gpu/buffer_pool.ts): what it gives back and when,
// and the memory its destroyed buffers hold until the GPU has caught up with them.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PhaseMemory } from '../src/gpu/phase_memory.ts';
import type { Runtime } from '../src/gpu/runtime.ts';
import { gpu } from './support/gpu.ts';

const MiB = 2 ** 20;

/** Runs `body` on a pool emptied of free buffers and capped `room` bytes above what it holds; the cap is lifted after. */
async function capped(room: number, body: (rt: Runtime) => Promise<void>): Promise<void> {
  const rt = await gpu();
  rt.releaseCached();
  await rt.sync();
  const limit = rt.pool.limit;
  rt.pool.limit = rt.pool.stats.allocated + room;
  rt.pool.resetPeaks();
  try {
    await body(rt);
  } finally {
    rt.pool.limit = limit;
    rt.releaseCached();
    await rt.sync();
  }
}

describe('buffer pool under a budget', () => {
  test('a free buffer of a class up to twice the request\'s serves it before anything is destroyed', () => capped(2 * MiB, async (rt) => {
    const big = rt.pool.acquire(2 * MiB);
    rt.pool.release(big);
    const { createdBytes, destroyedBytes } = rt.pool.stats;
    const b = rt.pool.acquire(1.75 * MiB);
    assert.equal(b, big);
    assert.deepEqual([rt.pool.stats.createdBytes, rt.pool.stats.destroyedBytes], [createdBytes, destroyedBytes]);
    rt.pool.release(b);
    // Past twice the request, the larger buffer is given back instead: it would waste more than it saves.
    const small = rt.pool.acquire(MiB / 2);
    assert.notEqual(small, big);
    assert.equal(rt.pool.stats.destroyedBytes, destroyedBytes + 2 * MiB);
    rt.pool.release(small);
  }));

  test('it gives back the least recently released free buffers first, and only as many as the request needs', () => capped(4 * MiB, async (rt) => {
    const [a, b, c] = [rt.pool.acquire(MiB), rt.pool.acquire(MiB), rt.pool.acquire(MiB)];
    for (const x of [b, a, c]) rt.pool.release(x);
    const before = rt.pool.stats.destroyedBytes;
    const d = rt.pool.acquire(2 * MiB);
    // b went first; a and c are still free and come back without a new buffer.
    assert.equal(rt.pool.stats.destroyedBytes - before, MiB);
    const created = rt.pool.stats.createdBytes;
    const again = new Set([rt.pool.acquire(MiB), rt.pool.acquire(MiB)]);
    assert.deepEqual(again, new Set([a, c]));
    assert.equal(rt.pool.stats.createdBytes, created);
    for (const x of [...again, d]) rt.pool.release(x);
  }));

  test('destroyed buffers count as held until a wait on the GPU covers them', () => capped(2 * MiB, async (rt) => {
    const a = rt.pool.acquire(MiB);
    rt.pool.release(a);
    const b = rt.pool.acquire(2 * MiB);
    assert.equal(rt.pool.stats.unreclaimed, MiB);
    assert.ok(rt.pool.stats.peakHeld >= rt.pool.stats.allocated + MiB, `held ${rt.pool.stats.peakHeld}`);
    // A readback covers the work submitted before it.
    await rt.read(b, 0, 16);
    assert.equal(rt.pool.stats.unreclaimed, 0);
    rt.pool.release(b);
    rt.releaseCached();
    assert.equal(rt.pool.stats.unreclaimed, 2 * MiB);
    await rt.settle();
    assert.equal(rt.pool.stats.unreclaimed, 0);
    const submits = rt.submitCount;
    await rt.settle();
    assert.equal(rt.submitCount, submits, 'nothing to wait for: no submit');
  }));

  test('sizes that come and go under the budget hold about the budget, not a trimmed free list on top of it', () => capped(64 * MiB, async (rt) => {
    // Micro-batches of different lengths, as an update records them: each makes
    // intermediates of its own sizes, and the GPU is waited on between them (settle).
    const destroyedBefore = rt.pool.stats.destroyedBytes;
    for (let r = 0; r < 12; r++) {
      const rows = [7, 6, 8, 5][r % 4];
      const held = [...[1, 1, 2, 3, 0.5].map((m) => m * rows), 4].map((m) => rt.pool.acquire((m * MiB) / 2));
      for (const x of held) rt.pool.release(x);
      await rt.settle();
    }
    // Trimming every free buffer whenever a new size did not fit held 85 MiB here and destroyed 272.
    const { peakHeld } = rt.pool.stats;
    const destroyed = rt.pool.stats.destroyedBytes - destroyedBefore;
    assert.ok(peakHeld <= 1.1 * rt.pool.limit, `held ${(peakHeld / MiB).toFixed(1)} MiB under a cap of ${(rt.pool.limit / MiB).toFixed(1)} MiB`);
    assert.ok(destroyed <= rt.pool.limit / 4, `${(destroyed / MiB).toFixed(1)} MiB destroyed`);
  }));

  test('a phase ends with its trimmed memory back, and its peak counts what was not back yet', async () => {
    const rt = await gpu();
    await rt.sync();
    const phases = new PhaseMemory(rt);
    const a = rt.pool.acquire(3 * MiB);
    rt.pool.release(a);
    rt.releaseCached();
    const b = rt.pool.acquire(MiB);
    const held = rt.pool.stats.allocated + rt.pool.stats.unreclaimed;
    rt.pool.release(b);
    await phases.end('test');
    assert.equal(rt.pool.stats.unreclaimed, 0);
    assert.ok(phases.metrics()['memory/test_peak_gib'] * 2 ** 30 >= held);
    assert.equal(rt.pool.stats.peakHeld, rt.pool.stats.allocated);
  });
});
