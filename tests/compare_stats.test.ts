import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { finalValidationWins, summarizeMethod } from '../src/compare/compare.ts';
import type { RunData } from '../src/report/report.ts';

const root = mkdtempSync(join(tmpdir(), 'wgt-compare-stats-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** A run directory whose validations at `iterations` logged `outcomes` ([task seed, won] per trajectory). */
function run(name: string, logs: Record<number, [number, boolean][]>): RunData {
  const dir = join(root, name);
  mkdirSync(join(dir, 'rollouts'), { recursive: true });
  for (const [iteration, outcomes] of Object.entries(logs)) {
    const lines = outcomes.map(([seed, won], i) => JSON.stringify({ trajectoryId: `${seed}/${i}`, groupId: `val${iteration}-${seed}`, seed, won, turns: [] }));
    writeFileSync(join(dir, 'rollouts', `val-${iteration}.jsonl`), lines.join('\n') + '\n');
  }
  return { name, dir, config: null, rows: [{ iteration: 0, 'val/success': 0.5 }] };
}

describe('compare statistics', () => {
  test('the last validation counts every run of each task (validation.runs)', () => {
    const r = run('tally', { 2: [[1, false], [1, false]], 10: [[1, true], [1, false], [2, false], [2, false]] });
    assert.deepEqual([...finalValidationWins(r)!], [[1, { attempts: 2, wins: 1 }], [2, { attempts: 2, wins: 0 }]]);
  });

  test('pass@k pools the attempts of every seed for the tasks all seeds finished', () => {
    const a = run('a', { 4: [[1, true], [1, false], [2, false], [2, false], [3, true], [3, true]] });
    const b = run('b', { 4: [[1, false], [1, false], [2, true], [2, false]] });
    const row = summarizeMethod('grpo', [{ seed: 0, data: a }, { seed: 1, data: b }]);
    // Task 1: 1 win in 4 attempts; task 2: 1 in 4; task 3 is missing from seed 1.
    assert.equal(row.passAtK[1], 0.25);
    assert.equal(row.passAtK[2], 1 - 3 / 6);
    assert.equal(row.passAtK[4], 1);
    assert.equal(row.passAtK[8], undefined);
  });
});
