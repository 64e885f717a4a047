// Evaluation statistics against values worked out by hand.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatMeanStd, meanStd, passAtK, stability, summarizeEval, type EpisodeOutcome } from '../src/report/eval_stats.ts';

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

describe('eval statistics', () => {
  test('pass@k is 1 - C(n-c, k)/C(n, k)', () => {
    close(passAtK(5, 2, 1), 0.4);
    close(passAtK(5, 2, 2), 1 - 3 / 10); // C(3,2) = 3, C(5,2) = 10
    close(passAtK(5, 2, 3), 1 - 1 / 10); // C(3,3) = 1, C(5,3) = 10
    assert.equal(passAtK(5, 2, 4), 1); // n - c < k: some success is certain
    assert.equal(passAtK(8, 0, 8), 0);
    assert.equal(passAtK(8, 8, 1), 1);
    close(passAtK(10, 3, 4), 1 - 35 / 210); // C(7,4) = 35, C(10,4) = 210
    // Large n: the binomials overflow doubles, the product does not.
    close(passAtK(2000, 1000, 500), 1 - Math.exp(lnChoose(1000, 500) - lnChoose(2000, 500)), 1e-12);
    close(passAtK(2000, 1, 1000), 0.5, 1e-12);
    assert.throws(() => passAtK(5, 6, 1), /passAtK/);
    assert.throws(() => passAtK(5, 2, 6), /passAtK/);
  });

  test('mean and sample std (n - 1)', () => {
    const m = meanStd([0.5, 0.25, 0.75, 0.5]);
    close(m.mean, 0.5);
    close(m.std, Math.sqrt(0.125 / 3));
    assert.equal(m.n, 4);
    assert.ok(Number.isNaN(meanStd([1]).std));
    assert.equal(formatMeanStd(m, 2), '0.50 ± 0.20 (n=4)');
  });

  test('summary over seeds, tasks and task types', () => {
    // Three seeds over tasks a (type x), b (type x), c (type y).
    const wins: Record<string, boolean[]> = { a: [true, true, false], b: [false, false, false], c: [true, false, true] };
    const types: Record<string, string> = { a: 'x', b: 'x', c: 'y' };
    const episodes: EpisodeOutcome[] = [];
    for (const task of ['a', 'b', 'c']) {
      wins[task].forEach((won, seed) => episodes.push({ taskId: task, taskType: types[task], seed, won, score: won ? 1 : 0.25 }));
    }
    const s = summarizeEval(episodes, [1, 2, 3, 4]);
    assert.equal(s.seeds, 3);
    assert.equal(s.tasks, 3);
    // Success per seed: 2/3, 1/3, 1/3.
    close(s.success.mean, 4 / 9);
    close(s.success.std, Math.sqrt(((2 / 9) ** 2 + 2 * (1 / 9) ** 2) / 2));
    // pass@1 = mean c/n = (2/3 + 0 + 2/3) / 3; pass@2: a 1 - C(1,2)/C(3,2) = 1, b 0, c 1.
    close(s.passAtK[1], 4 / 9);
    close(s.passAtK[2], 2 / 3);
    close(s.passAtK[3], 2 / 3);
    assert.equal(s.passAtK[4], undefined, 'k above the attempts per task is not reported');
    close(s.byType.x.success.mean, (1 / 2 + 1 / 2 + 0) / 3);
    close(s.byType.y.passAtK[1], 2 / 3);
    assert.equal(s.byType.y.tasks, 1);
    // Scores per seed: (1 + 0.25 + 1)/3, (1 + 0.25 + 0.25)/3, (0.25 + 0.25 + 1)/3.
    close(s.score!.mean, (2.25 + 1.5 + 1.5) / 9);
    assert.equal(summarizeEval(episodes.map(({ score: _s, ...e }) => e)).score, null);
  });

  test('stability: peak against final', () => {
    assert.deepEqual(stability([[5, 0.2], [10, 0.6], [15, NaN], [20, 0.45]]), { peak: 0.6, peakIteration: 10, final: 0.45, finalIteration: 20, dropFromPeak: 0.6 - 0.45 });
    assert.equal(stability([]), null);
  });
});

function lnChoose(n: number, k: number): number {
  let s = 0;
  for (let i = 0; i < k; i++) s += Math.log(n - i) - Math.log(i + 1);
  return s;
}
