// Waiting for the GPU without spinning the event loop (src/gpu/paced_wait.ts): a long
// wait sleeps between event-loop turns, a short one does not, values and errors pass
// through, and the pacer stops once nothing waits.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { kernelPolicy, type Pacing } from '../src/gpu/kernel_policy.ts';
import { pacedWait, pacerStats } from '../src/gpu/paced_wait.ts';

const pacing = kernelPolicy().pacing;

const later = <T>(ms: number, value: T) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Event-loop turns another immediate-queue loop sees while `p` is pending, after the first `skipMs`. */
async function turnsDuring(p: Promise<unknown>, skipMs: number): Promise<number> {
  const start = performance.now();
  let turns = 0;
  let on = true;
  const tick = () => {
    if (!on) return;
    if (performance.now() - start > skipMs) turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  await p;
  on = false;
  return turns;
}

describe('paced wait', () => {
  test('a long wait sleeps between event-loop turns once it has lasted spinMs', async () => {
    const naps = pacerStats.naps;
    const skipMs = 2 * pacing.spinMs;
    const waitMs = skipMs + 40;
    let value = '';
    const turns = await turnsDuring(pacedWait(later(waitMs, 'done'), pacing).then((v) => { value = v; }), skipMs);
    assert.equal(value, 'done');
    // Spinning, the loop turns thousands of times in 40 ms; napping, at most once a nap.
    const most = (waitMs - skipMs) / pacing.napMs;
    assert.ok(turns <= most * 1.25 + 5, `${turns} turns after the first ${skipMs} ms, expected at most about ${most}`);
    assert.ok(pacerStats.naps > naps, `no nap in a ${waitMs} ms wait`);
  });

  test('a wait that ends at once does not nap, and the pacer stops after it', async () => {
    const naps = pacerStats.naps;
    assert.equal(await pacedWait(Promise.resolve(7), pacing), 7);
    await turn();
    await turn();
    const turns = pacerStats.turns;
    await turn();
    await turn();
    assert.equal(pacerStats.turns, turns, 'the pacer kept turning with nothing to wait for');
    assert.equal(pacerStats.naps, naps);
  });

  test('a failed wait rethrows its error and releases the pacer', async () => {
    await assert.rejects(pacedWait(Promise.reject(new Error('device lost')), pacing), /device lost/);
    await turn();
    await turn();
    const turns = pacerStats.turns;
    await turn();
    await turn();
    assert.equal(pacerStats.turns, turns);
  });

  // The rules, not the constants: a long spin keeps a descheduled test process from
  // aging a fresh wait past it.
  const withSpin = (ms: number, body: (slow: Pacing) => Promise<void>) => body({ ...pacing, spinMs: ms });

  test('a new wait after a long one spins again before napping', () =>
    withSpin(20, async (slow) => {
      const before = pacerStats.naps;
      await pacedWait(later(2 * slow.spinMs, null), slow);
      assert.ok(pacerStats.naps > before, 'the long wait never napped');
      const naps = pacerStats.naps;
      await pacedWait(turn(), slow);
      assert.equal(pacerStats.naps, naps, 'a short wait right after a long one napped');
    }));

  test('a new wait beside one still pending spins: only the newest wait\'s age counts', () =>
    withSpin(20, async (slow) => {
      const before = pacerStats.naps;
      let oldDone = false;
      const old = pacedWait(later(10 * slow.spinMs, null), slow).then(() => {
        oldDone = true;
      });
      while (pacerStats.naps === before && !oldDone) await turn();
      assert.ok(!oldDone, 'the old wait ended without ever napping');
      const naps = pacerStats.naps;
      await pacedWait(turn(), slow);
      assert.equal(pacerStats.naps, naps, 'a short wait beside an old one napped');
      await old;
    }));
});
