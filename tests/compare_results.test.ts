// The method comparison kept as data: archived runs (src/compare/archive.ts) and the
// table and curves rebuilt from them (src/compare/results.ts), on hand-worked values.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { archivedComplete, archiveRun, readArchive, readSegments, recordSegment, sourceCommit, type ArchivedRun } from '../src/compare/archive.ts';
import { pairedDifference } from '../src/compare/paired_difference.ts';
import { pooledPassAtK, replaceBlock, repositoryPage, resultRows, resultsBlock } from '../src/compare/results.ts';
import { parseSeeds } from '../src/cli/compare.ts';

const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;

/** A run directory: metrics rows and validation logs of `wins[task] = [won, won, ...]` per validation iteration. */
function fakeRun(root: string, name: string, rows: Record<string, number>[], validations: Record<number, Record<number, boolean[]>>): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'rollouts'), { recursive: true });
  writeFileSync(join(dir, 'metrics.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  for (const [it, tasks] of Object.entries(validations)) {
    const lines = Object.entries(tasks).flatMap(([seed, outcomes]) => outcomes.map((won, k) => JSON.stringify({
      trajectoryId: `v${seed}-${k}`, groupId: `v${seed}`, task: 't', taskType: 'x', split: 'valid_seen', seed: Number(seed), won,
      episodeReturn: won ? 10 : 0, turns: [], truncated: false,
    })));
    writeFileSync(join(dir, 'rollouts', `val-${it}.jsonl`), lines.join('\n') + '\n');
  }
  return dir;
}

/** An archived run made in memory, for the statistics. */
function archived(method: string, seed: number, finalTasks: Record<string, [number, number]>, rows: Record<string, number>[] = []): ArchivedRun {
  return {
    name: `${method}-s${seed}`, dir: '', rows,
    meta: { method, seed, iterations: 100, plannedIterations: 100, commit: 'abc', command: 'c', configHash: 'h' },
    validation: { final: { iteration: 100, tasks: finalTasks }, peak: null },
  };
}

describe('archived comparison runs', () => {
  test('an archive keeps the table\'s keys, rounded, and the final and peak validations per task', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-archive-'));
    const rows: Record<string, number>[] = [
      { iteration: 0, 'val/success': 0.25 },
      { iteration: 1, 'rollout/success': 0.123456789, 'time/rollout': 1.5, 'time/update': 0.5, 'actor/kl': 0.01, 'teacher/gap': -0.0567891, 'sdar/gate_mean': 0.4567891, 'skill_sd/ratio': 1 },
      { iteration: 2, 'rollout/success': 0.2, 'time/rollout': 1.5, 'time/update': 0.5, 'val/success': 0.75 },
      { iteration: 3, 'rollout/success': 0.3, 'time/rollout': 1.5, 'time/update': 0.5, 'val/success': 0.5 },
    ];
    const run = fakeRun(root, 'run', rows, {
      0: { 7: [false, true], 9: [false, false] },
      2: { 7: [true, true], 9: [true, false] },
      3: { 7: [true, false], 9: [true, false] },
    });
    const dest = join(root, 'results', 'grpo-s0');
    archiveRun(run, dest, { method: 'grpo', seed: 0, plannedIterations: 3, commit: 'abc1234', command: 'bun run cli compare x', configHash: 'h' });
    const [a] = readArchive(join(root, 'results'));
    assert.equal(a.meta.iterations, 3);
    assert.deepEqual(a.rows[1], { iteration: 1, 'rollout/success': 0.1235, 'time/rollout': 1.5, 'time/update': 0.5, 'teacher/gap': -0.05679, 'sdar/gate_mean': 0.4568 }, 'actor/kl and skill_sd/ratio left out, 4 significant digits');
    assert.deepEqual(a.validation, {
      final: { iteration: 3, tasks: { 7: [1, 2], 9: [1, 2] } },
      peak: { iteration: 2, tasks: { 7: [2, 2], 9: [1, 2] } },
    });
    assert.equal(archivedComplete(join(root, 'results'), 'grpo-s0'), true);
    assert.equal(archivedComplete(join(root, 'results'), 'grpo-s1'), false);
    archiveRun(run, dest, { method: 'grpo', seed: 0, plannedIterations: 150, commit: 'abc1234', command: 'c', configHash: 'h' });
    assert.equal(archivedComplete(join(root, 'results'), 'grpo-s0'), false, '3 of 150 iterations');
  });

  test('a run made in segments keeps each one\'s commit and command; a run started over or resumed from an earlier point drops what it replaced', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-segments-'));
    const cmp = join(root, 'cmp');
    recordSegment(cmp, 'grpo-s0', { from: 1, commit: 'old1', command: 'first try' });
    recordSegment(cmp, 'grpo-s0', { from: 1, commit: 'aaa', command: 'compare --parallel 2 --time-limit 9' });
    recordSegment(cmp, 'grpo-s0', { from: 41, commit: 'aaa', command: 'compare --time-limit 9 --resume' });
    recordSegment(cmp, 'grpo-s0', { from: 81, commit: 'bbb', command: 'compare --time-limit 3 --resume' });
    // The checkpoint of 80 was lost: the next segment continues from 71 and replaces the one from 81.
    const whole = 'ccc1234' + 'e'.repeat(33);
    recordSegment(cmp, 'grpo-s0', { from: 71, commit: whole, command: 'compare --resume' });
    const segments = readSegments(cmp, 'grpo-s0');
    assert.deepEqual(segments.map((s) => [s.from, s.commit]), [[1, 'aaa'], [41, 'aaa'], [71, whole]]);
    assert.deepEqual(readSegments(cmp, 'sdar-s0'), [], 'none noted');
    const run = fakeRun(root, 'run', [{ iteration: 0, 'val/success': 0.2 }, { iteration: 100, 'val/success': 0.3 }], {});
    archiveRun(run, join(root, 'results', 'grpo-s0'), { method: 'grpo', seed: 0, plannedIterations: 100, commit: whole, command: 'compare --resume', configHash: 'h', segments });
    const [a] = readArchive(join(root, 'results'));
    assert.deepEqual(a.meta.segments, segments);
    const block = resultsBlock('household', [a], 'figures/x.svg');
    assert.match(block, /from commits `aaa`, `ccc1234`, made by:/, 'whole hashes named by their first 7 digits');
    assert.match(block, /    compare --parallel 2 --time-limit 9\n    compare --time-limit 9 --resume\n    compare --resume\n/);
    writeFileSync(join(root, 'results', 'grpo-s0', 'run.json'), JSON.stringify({ ...a.meta, segments: [{ from: 0, commit: 'x', command: 'y' }] }));
    assert.throws(() => readArchive(join(root, 'results')), /grpo-s0\/run\.json: segments\[0\]: from must be an iteration >= 1, got 0/);
  });

  test('the source commit: WGT_COMMIT where set (a copied tree\'s .git may be another commit\'s), else git, else unknown', () => {
    const saved = process.env.WGT_COMMIT;
    try {
      process.env.WGT_COMMIT = 'feed123';
      assert.equal(sourceCommit(), 'feed123');
      delete process.env.WGT_COMMIT;
      assert.match(sourceCommit(), /^[0-9a-f]{7,}(\+changes)?$/);
      assert.equal(sourceCommit(mkdtempSync(join(tmpdir(), 'wgt-nogit-'))), 'unknown');
    } finally {
      if (saved === undefined) delete process.env.WGT_COMMIT;
      else process.env.WGT_COMMIT = saved;
    }
  });

  test('a broken run.json names the file and the field', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-archive-'));
    mkdirSync(join(root, 'sdar-s0'));
    writeFileSync(join(root, 'sdar-s0', 'run.json'), JSON.stringify({ method: 'sdar', seed: -1 }));
    assert.throws(() => readArchive(root), /sdar-s0\/run\.json: commit must be a string/);
  });
});

describe('the comparison table', () => {
  test('paired by seed and task: the mean difference; with one constant difference the interval closes on it', () => {
    // Seed 0: method 1/2, 2/2 against baseline 0/2, 1/2 -> +0.5, +0.5; seed 1: +0.5, +0.5 as well.
    const m = [archived('sdar', 0, { 1: [1, 2], 2: [2, 2] }), archived('sdar', 1, { 1: [2, 2], 2: [1, 2] })];
    const b = [archived('grpo', 0, { 1: [0, 2], 2: [1, 2] }), archived('grpo', 1, { 1: [1, 2], 2: [0, 2] })];
    assert.deepEqual(pairedDifference(m, b), { mean: 0.5, lo: 0.5, hi: 0.5, seeds: 2, tasks: 2 });
  });

  test('paired differences that vary get an interval around their mean; only shared seeds and tasks count', () => {
    // Differences: seed 0 tasks (1, 2) = (+1, 0); seed 1 = (0, -0.5); task 3 only in the method, seed 2 only in the baseline.
    const m = [archived('rlsd', 0, { 1: [2, 2], 2: [1, 2], 3: [2, 2] }), archived('rlsd', 1, { 1: [1, 2], 2: [0, 2] })];
    const b = [archived('grpo', 0, { 1: [0, 2], 2: [1, 2] }), archived('grpo', 1, { 1: [1, 2], 2: [1, 2] }), archived('grpo', 2, { 1: [2, 2], 2: [2, 2] })];
    const d = pairedDifference(m, b)!;
    assert.equal(d.mean, 0.125);
    assert.deepEqual([d.seeds, d.tasks], [2, 2]);
    assert.ok(d.lo < d.mean && d.mean < d.hi && d.lo >= -0.5 && d.hi <= 1, JSON.stringify(d));
    assert.deepEqual(pairedDifference(m, b), d, 'the bootstrap is seeded');
    assert.equal(pairedDifference(m, [archived('grpo', 7, { 1: [0, 2] })]), null, 'no shared seed');
  });

  test('pass@k pools the seeds\' attempts per task', () => {
    // Task 1: 1 of 4 attempts won; task 2: 0 of 4. pass@1 = (1/4 + 0)/2; pass@2 = (1 - C(3,2)/C(4,2))/2 = 0.25; pass@4 = 0.5.
    const runs = [archived('grpo', 0, { 1: [1, 2], 2: [0, 2] }), archived('grpo', 1, { 1: [0, 2], 2: [0, 2] })];
    assert.deepEqual(pooledPassAtK(runs), { 1: 0.125, 2: 0.25, 4: 0.5 });
  });

  test('rows: final and peak over seeds, seconds per iteration and the teacher\'s share of the step time', () => {
    const rows = (finalVal: number): Record<string, number>[] => [
      { iteration: 0, 'val/success': 0.2 },
      { iteration: 1, 'time/rollout': 2, 'time/teacher': 1, 'time/update': 1 },
      { iteration: 2, 'time/rollout': 2, 'time/teacher': 1, 'time/update': 1, 'val/success': 0.6 },
      { iteration: 3, 'time/rollout': 2, 'time/teacher': 1, 'time/update': 1, 'val/success': finalVal },
    ];
    const [g, s] = resultRows([
      archived('sdar', 0, { 1: [1, 1] }, rows(0.4)), archived('sdar', 1, { 1: [1, 1] }, rows(0.5)), archived('grpo', 0, { 1: [0, 1] }, rows(0.3)),
    ]);
    assert.equal(g.method, 'grpo', 'the baseline first');
    assert.equal(g.vsBaseline, null);
    assert.deepEqual([s.finalVal.mean, s.peakVal.mean, s.peakVal.std], [0.45, 0.6, 0]);
    assert.ok(Math.abs(s.finalVal.std - Math.SQRT1_2 * 0.1) < 1e-12);
    assert.deepEqual([s.secondsPerIteration.mean, s.teacherShare.mean], [4, 0.25]);
    assert.deepEqual(s.vsBaseline, { mean: 1, lo: 1, hi: 1, seeds: 1, tasks: 1 });
  });

  test('the generated block replaces its markers, is appended when absent, and a half-open block is refused', () => {
    const block = (body: string) => `<!-- results:household:begin (written by \`npx bun run cli results\`; edit the archive, not this block) -->\n${body}\n<!-- results:household:end -->`;
    const page = `# Results\n\nintro\n\n${block('old')}\n\nafter\n`;
    assert.equal(replaceBlock(page, 'household', block('new')), `# Results\n\nintro\n\n${block('new')}\n\nafter\n`);
    assert.equal(replaceBlock('# Results\n', 'household', block('x')), `# Results\n\n${block('x')}\n`);
    assert.throws(() => replaceBlock('<!-- results:household:end -->', 'household', block('x')), /opened or closed but not both/);
  });

  test('`results` rebuilds the page block and the figure from the archive, on the CPU', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-results-'));
    const rows: Record<string, number>[] = [{ iteration: 0, 'val/success': 0.25 }, { iteration: 1, 'time/rollout': 1, 'val/success': 0.5 }];
    for (const [method, seed] of [['grpo', 0], ['sdar', 0]] as const) {
      const run = fakeRun(root, `${method}-s${seed}`, rows, { 1: { 3: [true, false] } });
      archiveRun(run, join(root, 'docs', 'results', 'household', `${method}-s${seed}`), { method, seed, plannedIterations: 1, commit: 'abc1234', command: 'bun run cli compare x', configHash: 'h' });
    }
    mkdirSync(join(root, 'docs', 'figures'), { recursive: true });
    writeFileSync(join(root, 'docs', 'RESULTS.md'), '# Results\n');
    const r = spawnSync(process.execPath, [cli, 'results', join(root, 'docs', 'results', 'household'), '--page', join(root, 'docs', 'RESULTS.md')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const page = readFileSync(join(root, 'docs', 'RESULTS.md'), 'utf8');
    assert.match(page, /\| sdar \| 0 \| 1 \| 0\.500 \| 0\.500 \| \+0\.0 \(\+0\.0 to \+0\.0; 1 seed × 1 task\)/);
    assert.match(page, /from commit `abc1234`/);
    // An archive's command recorded with Bun bare is shown as a fresh machine runs it.
    assert.match(page, /^ {4}npx bun run cli compare x$/m);
    const svg = readFileSync(join(root, 'docs', 'figures', 'household_methods_validation.svg'), 'utf8');
    assert.ok(svg.startsWith('<svg') && svg.includes('<style>') && svg.includes('sdar (1 seed)'));
    const missing = spawnSync(process.execPath, [cli, 'results', join(root, 'nowhere')], { encoding: 'utf8' });
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /nowhere: no such folder/);
    assert.ok(!existsSync(join(root, 'nowhere')));
  });

  test('`results` on an archive that is not this repository\'s prints its table and writes no page unless one is named', () => {
    // A user's own project, laid out as this repository is, the command run from its root.
    const project = mkdtempSync(join(tmpdir(), 'wgt-results-own-'));
    const run = fakeRun(project, 'made', [{ iteration: 1, 'val/success': 0.5 }], { 1: { 3: [true, false] } });
    archiveRun(run, join(project, 'docs', 'results', 'household', 'grpo-s0'), { method: 'grpo', seed: 0, plannedIterations: 1, commit: 'abc1234', command: 'c', configHash: 'h' });
    writeFileSync(join(project, 'docs', 'RESULTS.md'), '# My results\n');
    const r = spawnSync(process.execPath, [cli, 'results', 'docs/results/household'], { cwd: project, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^\| grpo \| 0 \| 1 \| 0\.500 /m);
    assert.match(r.stdout, /1 runs; wrote nothing: docs\/results\/household is not this repository's docs\/results\/household, so its block goes only into a page named with --page FILE/);
    assert.equal(readFileSync(join(project, 'docs', 'RESULTS.md'), 'utf8'), '# My results\n');
    assert.ok(!existsSync(join(project, 'docs', 'figures')));
    const named = spawnSync(process.execPath, [cli, 'results', 'docs/results/household', '--page', 'docs/RESULTS.md'], { cwd: project, encoding: 'utf8' });
    assert.equal(named.status, 0, named.stderr);
    assert.match(readFileSync(join(project, 'docs', 'RESULTS.md'), 'utf8'), /<!-- results:household:begin/);
    assert.ok(existsSync(join(project, 'docs', 'figures', 'household_methods_validation.svg')));
    // This repository's own archive keeps its page by default.
    const root = new URL('..', import.meta.url).pathname;
    assert.equal(repositoryPage(join(root, 'docs', 'results', 'household')), join(root, 'docs', 'RESULTS.md'));
    assert.equal(repositoryPage(join(project, 'docs', 'results', 'household')), null);
  });

  test('--seeds: a count, a list, ranges (one seed alone as N-N); backwards ranges and repeats refused', () => {
    assert.deepEqual(parseSeeds('3'), [0, 1, 2]);
    assert.deepEqual(parseSeeds('2,5'), [2, 5]);
    assert.deepEqual(parseSeeds('2-2'), [2]);
    assert.deepEqual(parseSeeds('0, 3-5'), [0, 3, 4, 5]);
    assert.throws(() => parseSeeds('4-2'), /--seeds 4-2: the range 4-2 runs backwards/);
    assert.throws(() => parseSeeds('1,0-2'), /--seeds 1,0-2: a seed is listed twice/);
    assert.throws(() => parseSeeds('1,x'), /--seeds/);
  });

  test('a run stopped at --time-limit and continued by --resume is archived with both segments, each with its commit and command', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-compare-segments-'));
    const results = join(root, 'results');
    const out = join(root, 'cmp');
    // --time-limit 0 is the whole invocation's: its first run makes one iteration and
    // stops with a checkpoint, and the second run (seed 1) is not started.
    const compare = (commit: string) => spawnSync(process.execPath, [
      cli, 'compare', 'examples/smoke.yaml', 'iterations=2', '--methods', 'grpo', '--seeds', '2', '--resume', '--results', results, '--out', out, '--time-limit', '0', '--full-size',
    ], { encoding: 'utf8', env: { ...process.env, WGT_COMMIT: commit } });
    const first = compare('aaa1111');
    assert.equal(first.status, 0, first.stderr + first.stdout);
    assert.ok(!existsSync(join(results, 'grpo-s0')), 'one of two iterations: not archived');
    assert.match(first.stdout, /stopped grpo-s0 at iteration 1 of 2 \(\d+ s; continue with --resume\)/);
    assert.match(first.stdout, /not started grpo-s1: no time left \(continue with --resume\)/);
    const second = compare('bbb2222');
    assert.equal(second.status, 0, second.stderr + second.stdout);
    assert.match(second.stdout, /done grpo-s0 \(\d+ s, 2 of 2 iterations\) \| compare: 1 of 2 runs done.*\narchived grpo-s0/);
    assert.match(second.stdout, /not started grpo-s1/);
    assert.ok(!existsSync(join(out, 'grpo-s1')), 'a run never started leaves no directory and no segment');
    const [a] = readArchive(results);
    assert.equal(a.meta.iterations, 2);
    assert.equal(a.meta.commit, 'bbb2222');
    assert.deepEqual(a.meta.segments?.map((s) => [s.from, s.commit]), [[1, 'aaa1111'], [2, 'bbb2222']]);
    assert.ok(a.meta.segments!.every((s) => s.command.startsWith('npx bun run cli compare examples/smoke.yaml iterations=2 --methods grpo') && s.command.includes('--time-limit 0')));
  });

  test('compare --results skips runs archived complete: no training starts for them', () => {
    const root = mkdtempSync(join(tmpdir(), 'wgt-compare-skip-'));
    const results = join(root, 'results');
    const run = fakeRun(root, 'done', [{ iteration: 150, 'val/success': 0.3 }], {});
    archiveRun(run, join(results, 'grpo-s0'), { method: 'grpo', seed: 0, plannedIterations: 150, commit: 'abc', command: 'c', configHash: 'h' });
    const out = join(root, 'cmp');
    const r = spawnSync(process.execPath, [cli, 'compare', 'examples/compare_household.yaml', '--methods', 'grpo', '--seeds', '1', '--resume', '--results', results, '--out', out], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /skip grpo-s0: archived complete/);
    assert.ok(!existsSync(join(out, 'grpo-s0')), 'no run was started');
  });
});
