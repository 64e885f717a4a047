// The comparison set beside the paper (src/compare/paper_table.ts, rank_order.ts) and
// the table of what the terms saw (src/compare/run_dynamics.ts), on small archives
// made in memory with hand-worked values.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ArchivedRun } from '../src/compare/archive.ts';
import { ARCHIVE_KEYS } from '../src/compare/archive.ts';
import { paperReference, type PaperReference } from '../src/compare/paper_reference.ts';
import { orderSentences, paperRows, renderPaperTable } from '../src/compare/paper_table.ts';
import { orderAgreement, ranks } from '../src/compare/rank_order.ts';
import { resultsBlock } from '../src/compare/results.ts';
import { DYNAMICS_KEYS, dynamicsRows, dynamicsSection, dynamicsWindows, windowMean } from '../src/compare/run_dynamics.ts';
import { METHODS } from '../src/config/config_schema.ts';

/** A run of `method` whose final validation is `final` (a fraction), won on the panel's tasks as `wins` of 4 attempts each. */
function run(method: string, seed: number, final: number, wins: number[] = [], rows: Record<string, number>[] = []): ArchivedRun {
  return {
    name: `${method}-s${seed}`, dir: '',
    rows: [...rows, { iteration: 100, 'val/success': final }],
    meta: { method, seed, iterations: 100, plannedIterations: 100, commit: 'abc', command: 'c', configHash: 'h' },
    validation: { final: wins.length ? { iteration: 100, tasks: Object.fromEntries(wins.map((w, t) => [String(t), [w, 4]])) } : null, peak: null },
  };
}

/** A paper of three methods: a (50.0) > b (40.0) > c (30.0) on one model; on the other a and c tie, d has a value and no run. */
const REFERENCE: PaperReference = {
  benchmark: 'Bench',
  methods: ['a', 'b', 'c', 'd'],
  columns: [
    { model: 'Small', values: { a: { value: 50, source: 'sdar' }, b: { value: 40, source: 'sdar' }, c: { value: 30, source: 'opid' } } },
    { model: 'Large', values: { a: { value: 70, source: 'sdar' }, c: { value: 70, source: 'sdar' }, d: { value: 90, source: 'sdar' } } },
  ],
  notes: [],
  setting: 'The settings differ.',
};

describe('ranks and orders', () => {
  test('equal scores share a rank and the next rank skips past them', () => {
    const r = ranks(new Map([['a', 3], ['b', 5], ['c', 5], ['d', 1]]));
    assert.deepEqual(Object.fromEntries(r), { a: 3, b: 1, c: 1, d: 4 });
    assert.deepEqual(Object.fromEntries(ranks(new Map([['x', 0.1 + 0.2], ['y', 0.3]]))), { x: 1, y: 1 }, 'equal up to float rounding');
  });

  test('pairs of the keys both orders score: the same way round, swapped, or tied in one of them', () => {
    const paper = new Map([['a', 4], ['b', 3], ['c', 2], ['d', 2], ['x', 9]]);
    const ours = new Map([['a', 0.1], ['b', 0.3], ['c', 0.2], ['d', 0.1]]);
    const o = orderAgreement(paper, ours);
    assert.deepEqual(o.same.map((p) => `${p.above}>${p.below}`), ['b>c', 'b>d']);
    assert.deepEqual(o.swapped.map((p) => `${p.above}>${p.below}`), ['a>b', 'a>c']);
    assert.deepEqual(o.tied.map((p) => `${p.above}=${p.below}:${p.tiedIn}`), ['a=d:other', 'c=d:reference'], 'x has no value of ours and takes part in no pair');
  });
});

describe('beside the paper', () => {
  // Ours: b 0.40 > a 0.30 (two seeds, 0.20 and 0.40) > c 0.10; d has no run; e has runs and no paper value.
  const runs = [
    run('a', 0, 0.2, [1, 1]), run('a', 1, 0.4, [2, 1]),
    run('b', 0, 0.4, [2, 2]), run('b', 1, 0.4, [2, 1]),
    run('c', 0, 0.1, [0, 1]),
    run('e', 0, 0.3, [1, 1]),
  ];

  test('each column ranks only the methods it has a value for; a method without runs keeps its paper ranks; one without a paper value keeps ours', () => {
    const rows = paperRows(REFERENCE, runs);
    assert.deepEqual(rows.map((r) => r.method), ['a', 'b', 'c', 'd', 'e'], 'the paper\'s methods in its order, then the archive\'s others');
    const cell = (m: string) => rows.find((r) => r.method === m)!;
    assert.deepEqual(cell('a').paper.map((p) => p && p.rank), [1, 2], 'a ties c for second behind d on Large');
    assert.deepEqual(cell('c').paper.map((p) => p && p.rank), [3, 2]);
    assert.deepEqual(cell('b').paper.map((p) => p && p.rank), [2, null]);
    assert.equal(cell('d').ours, null);
    assert.deepEqual(cell('d').paper.map((p) => p && p.rank), [null, 1]);
    assert.deepEqual([cell('a').ours!.value.mean, cell('a').ours!.value.seeds, cell('a').ours!.rank], [0.30000000000000004, 2, 2]);
    assert.deepEqual([cell('b').ours!.rank, cell('e').ours!.rank, cell('c').ours!.rank], [1, 2, 4], 'e ties a at 0.30');
    const table = renderPaperTable(REFERENCE, rows);
    assert.match(table, /^\| c \| 30\.0† \| 3 \| 70\.0 \| 2 \| 10\.0 \(1\) \| 4 \|$/m, 'a reprinted number carries its mark');
    assert.match(table, /^\| d \| – \| – \| 90\.0 \| 1 \| – \(0\) \| – \|$/m);
  });

  test('the sentences name the pairs in the same order and those swapped, with our paired difference, and the methods not compared', () => {
    const [small, large, missing, setting] = orderSentences(REFERENCE, runs);
    // Small: a > b > c in the paper, b > a > c here: a > c and b > c agree, a > b is swapped.
    assert.match(small, /^Against the paper's Small column \(3 methods in both, 3 pairs\): the same order in 2: a > c and b > c /);
    // a − b per task: seed 0 (1/4 − 2/4, 1/4 − 2/4), seed 1 (0, 0): −0.125 on average.
    assert.match(small, /swapped in 1: a > b in the paper \(50\.0 against 40\.0\) but not here \(30\.0 against 40\.0; paired difference −12\.5 points, 95% interval .* over 2 seeds × 2 tasks, which (holds|leaves out) zero\)\.$/);
    // Large: a and c tie in the paper; d has no run, so one pair only.
    assert.equal(large, 'Against the paper\'s Large column (2 methods in both, 1 pair): the same order in none; swapped in none; tied in 1: a and c in the paper.');
    assert.equal(missing, 'Not in our order until their runs are archived: d.');
    assert.equal(setting, 'The settings differ.');
  });

  test('a column with fewer than two methods of ours says there is no order to compare', () => {
    const [small] = orderSentences(REFERENCE, [run('a', 0, 0.5)]);
    assert.equal(small, 'Against the paper\'s Small column: only a has a value in both, so there is no order to compare.');
  });

  test('the household reference names methods the trainer has, and the block shows it only for household', () => {
    const household = paperReference('household')!;
    for (const m of household.methods) assert.ok((METHODS as readonly string[]).includes(m), m);
    for (const c of household.columns) for (const m of Object.keys(c.values)) assert.ok(household.methods.includes(m), `${c.model}: ${m}`);
    assert.equal(paperReference('shop'), null);
    assert.equal(paperReference('constructor'), null);
    const h = resultsBlock('household', [run('grpo', 0, 0.3, [1]), run('sdar', 0, 0.4, [2])], 'figures/x.svg');
    assert.match(h, /\*\*Beside the paper\.\*\*[^]*\| grpo_opsd \| 32\.0 \| 5 \| 81\.2† \| 2 \| – \(0\) \| – \|[^]*\*\*What the terms saw\.\*\*/);
    assert.match(h, /\[docs\/REFERENCES\.md\]\(REFERENCES\.md\)/);
    const s = resultsBlock('shop', [run('grpo', 0, 0.3, [1])], 'figures/x.svg');
    assert.doesNotMatch(s, /Beside the paper/);
    assert.match(s, /\*\*What the terms saw\.\*\*/);
  });
});

describe('what the terms saw', () => {
  test('windows: the first, middle and last ten iterations', () => {
    assert.deepEqual(dynamicsWindows(100), [{ from: 1, to: 10 }, { from: 41, to: 50 }, { from: 91, to: 100 }]);
    assert.deepEqual(dynamicsWindows(150), [{ from: 1, to: 10 }, { from: 66, to: 75 }, { from: 141, to: 150 }]);
    assert.deepEqual(dynamicsWindows(6), [{ from: 1, to: 2 }, { from: 2, to: 3 }, { from: 5, to: 6 }], 'a short run: windows of a third');
  });

  test('a window\'s mean takes only its iterations and the rows that have the key', () => {
    // gap = −iteration/100 on every iteration but 45, which lacks it: 1-10 → −0.055, 41-50 → mean of 41..50 without 45.
    const rows = Array.from({ length: 100 }, (_, i): Record<string, number> => (i + 1 === 45 ? { iteration: 45 } : { iteration: i + 1, 'teacher/gap': -(i + 1) / 100 }));
    const [start, middle, end] = dynamicsWindows(100).map((w) => windowMean(rows, 'teacher/gap', w));
    assert.ok(Math.abs(start + 0.055) < 1e-12, String(start));
    assert.ok(Math.abs(middle + (41 + 42 + 43 + 44 + 46 + 47 + 48 + 49 + 50) / 900) < 1e-12, String(middle));
    assert.ok(Math.abs(end + 0.955) < 1e-12, String(end));
    assert.ok(Number.isNaN(windowMean(rows, 'sdar/gate_mean', { from: 1, to: 10 })));
  });

  test('rows average each window over the seeds that have the key; a run archived before a key was kept adds nothing to it', () => {
    const iters = (f: (it: number) => Record<string, number>) => Array.from({ length: 100 }, (_, i) => ({ iteration: i + 1, ...f(i + 1) }));
    const newer = run('sdar', 0, 0.3, [], iters((it) => ({ 'teacher/gap': it <= 50 ? -0.1 : -0.3, 'sdar/gate_mean': it <= 10 ? 0.4 : 0.6 })));
    const older = run('sdar', 1, 0.3, [], iters(() => ({ 'teacher/gap': -0.2 })));
    const [sdar, grpo] = dynamicsRows(['sdar', 'grpo'], [newer, older], dynamicsWindows(100));
    const at = (key: string) => DYNAMICS_KEYS.findIndex((k) => k.key === key);
    assert.equal(sdar.seeds, 2);
    const rounded = (key: string) => sdar.values[at(key)].map((v) => Number(v.toFixed(12)));
    assert.deepEqual(rounded('teacher/gap'), [-0.15, -0.15, -0.25]);
    assert.deepEqual(rounded('sdar/gate_mean'), [0.4, 0.6, 0.6], 'the older run has no gate: the newer alone');
    assert.ok(sdar.values[at('rlsd/clip_frac')].every(Number.isNaN));
    assert.deepEqual([grpo.seeds, grpo.values.flat().every(Number.isNaN)], [0, true], 'a method with no runs');
    const text = dynamicsSection(['sdar', 'grpo'], [newer, older]);
    assert.match(text, /^\| sdar \| 2 \| −0\.150 \/ −0\.150 \/ −0\.250 \| 0\.400 \/ 0\.600 \/ 0\.600 \| – \/ – \/ – \| – \/ – \/ – \|$/m);
    assert.match(text, /no run of this archive holds `sdar\/gate_above_half` or `rlsd\/clip_frac` yet/);
  });

  test('an archive keeps every key the table reads', () => {
    for (const { key } of DYNAMICS_KEYS) assert.ok(ARCHIVE_KEYS.includes(key), key);
  });
});
