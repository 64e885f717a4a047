// Every method through the trainer: plans per method, RetireOPD's retirement rule on
// hand-made gap histories, one iteration of each method from examples/smoke.yaml
// (the smoke run) with its own metrics logged, and the comparison table read
// back from those runs.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { METHODS } from '../src/config/config_schema.ts';
import { loadConfig } from '../src/config/config.ts';
import { comparePlan, runComparison, writeComparison } from '../src/compare/compare.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { runMethod } from '../src/config/methods.ts';
import { METHOD_DEFINITIONS } from '../src/algos/methods/index.ts';
import { retirementDue, type RetireState } from '../src/algos/methods/retire_opd.ts';
import { train } from '../src/trainer/train.ts';
import { gpu } from './support/gpu.ts';

const ROOT = join(import.meta.dirname, '..');
const SMOKE = join(ROOT, 'examples', 'smoke.yaml');

describe('method plans', () => {
  test('every configurable method has a definition by its name, and only SFT has no RL plan', () => {
    for (const m of METHODS) {
      assert.equal(METHOD_DEFINITIONS[m].name, m);
      assert.equal(METHOD_DEFINITIONS[m].loop === 'sft', m === 'sft');
      assert.equal(typeof METHOD_DEFINITIONS[m].plan, m === 'sft' ? 'undefined' : 'function');
    }
  });

  test('skills, teacher, policy gradient and schedules per method', () => {
    const plan = (method: string, it = 1, overrides: string[] = []) => runMethod(loadConfig(SMOKE, [`method=${method}`, ...overrides])).plan(it);
    assert.deepEqual([plan('grpo').skills, plan('grpo').teacher, plan('grpo').aux, plan('grpo').transform], ['none', false, null, null]);
    assert.equal(plan('skill_grpo').skills, 'policy');
    for (const m of ['sdar', 'opsd', 'grpo_opsd', 'skill_sd', 'pcsd', 'retire_opd']) {
      assert.equal(plan(m).teacher, true, `${m} scores with a teacher`);
      assert.equal(plan(m).skills, 'teacher');
      assert.ok(plan(m).aux, `${m} has an auxiliary term`);
      assert.equal(plan(m).transform, null);
    }
    assert.equal(plan('opsd').policyGradient, false);
    assert.equal(plan('sdar').policyGradient, true);
    for (const m of ['rlsd', 'agent_opsd', 'gigpo']) assert.ok(plan(m).transform, `${m} transforms advantages`);
    assert.equal(plan('gigpo').teacher, false);
    // RLSD: λ = 0.5·(1 − t/100) as the reference steps it, then plain GRPO without a teacher pass from iteration 100.
    assert.equal(plan('rlsd', 1).metrics['rlsd/lambda'], 0.495);
    assert.equal(plan('rlsd', 99).metrics['rlsd/lambda'], 0.5 * (1 - 99 / 100));
    assert.equal(plan('rlsd', 100).teacher, false);
    assert.equal(plan('rlsd', 100).transform, null);
    // ADRS: shaping and entropy 0.01 only in iterations 21-70.
    assert.deepEqual([plan('adrs', 20).teacher, plan('adrs', 20).entropyCoef], [false, 0.001]);
    assert.deepEqual([plan('adrs', 21).teacher, plan('adrs', 21).entropyCoef], [true, 0.01]);
    assert.deepEqual([plan('adrs', 71).teacher, plan('adrs', 71).entropyCoef], [false, 0.001]);
    const state: RetireState = { teacherSuccess: 0.5, gaps: [], pendingGaps: [], retiredAt: 4 };
    const retired = runMethod(loadConfig(SMOKE, ['method=retire_opd']), state).plan(5);
    assert.deepEqual([retired.teacher, retired.aux, retired.metrics['retire/retired']], [false, null, 1]);
  });
});

describe('RetireOPD retirement', () => {
  const cfg = { window: 2, fraction: 0.9, beta: 5, coef: 0.01 };
  const state = (gaps: number[], teacherSuccess: number | null = 0.5): RetireState => ({ teacherSuccess, gaps, pendingGaps: [], retiredAt: null });

  test('retires once the gap stalls for the window and the student is close enough', () => {
    const s = state([0.9, 0.5, 0.6]);
    s.pendingGaps = [0.5, 0.7];
    // Gaps become [0.9, 0.5, 0.6, 0.6] (the pending two average to 0.6): the last two never beat 0.5; 0.45 >= 0.9 x 0.5.
    assert.equal(retirementDue(s, 0.45, cfg, 8), true);
    assert.deepEqual(s.gaps, [0.9, 0.5, 0.6, 0.6]);
    assert.equal(s.retiredAt, 8);
    assert.equal(retirementDue(s, 0.45, cfg, 9), false, 'retires once');
  });

  test('stays while the gap still shrinks, the student lags, or the history is short', () => {
    const shrinking = state([0.9, 0.5, 0.6]);
    shrinking.pendingGaps = [0.4];
    assert.equal(retirementDue(shrinking, 0.5, cfg, 4), false);
    const lagging = state([0.9, 0.5, 0.6]);
    lagging.pendingGaps = [0.6];
    assert.equal(retirementDue(lagging, 0.44, cfg, 4), false, '0.44 < 0.9 x 0.5');
    const short = state([0.5]);
    short.pendingGaps = [0.6];
    assert.equal(retirementDue(short, 1, cfg, 2), false, 'two gaps do not fill a window of 2 plus a reference');
    assert.equal(retirementDue(state([0.9, 0.5, 0.6, 0.6], null), 1, cfg, 2), false, 'no teacher success measured');
  });
});

describe('every method through examples/smoke.yaml', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wgt-methods-'));
  for (const method of METHODS) {
    test(`${method}: one iteration with its metrics`, { timeout: 600_000 }, async () => {
      await gpu();
      const cfg = loadConfig(SMOKE, [`method=${method}`, `output.dir=${dir}`, `output.runName=${method}-s0`, 'output.progress=none']);
      const started = performance.now();
      const r = await train(cfg, { log: () => {} });
      const seconds = (performance.now() - started) / 1000;
      const rows = readMetrics(join(r.runDir, 'metrics.jsonl'));
      const last = rows[rows.length - 1];
      // SFT counts optimizer steps; the RL methods count iterations.
      assert.equal(last.iteration, method === 'sft' ? r.iterations : 1);
      assert.equal(typeof last['val/success'], 'number');
      assert.ok(existsSync(join(r.runDir, 'rollouts', `val-${last.iteration}.jsonl`)), 'validation trajectories kept for pass@k');
      const expect: Record<string, string[]> = {
        sdar: ['sdar/gate_mean', 'sdar/gate_above_half', 'sdar/gap', 'teacher/gap', 'time/teacher'],
        opsd: ['sdar/gate_mean'],
        grpo_opsd: ['sdar/gate_mean'],
        skill_sd: ['skill_sd/k3', 'skill_sd/ratio'],
        pcsd: ['pcsd/gate_mean'],
        rlsd: ['rlsd/lambda'],
        retire_opd: ['sdar/gate_mean', 'retire/retired'],
        skill_grpo: ['val_noskills/success'],
        adrs: ['adrs/active'],
        sft: ['sft/loss'],
      };
      for (const key of expect[method] ?? []) assert.equal(typeof last[key], 'number', `${method} logs ${key}`);
      // The default rollout correction (seq-mask) measures the engine against the trainer in every RL method.
      const corrected = method === 'sft' ? [] : ['rollout/is_ratio_mean', 'rollout/is_ratio_min', 'rollout/is_ratio_max', 'rollout/is_masked_share', 'rollout/mismatch_kl'];
      for (const key of corrected) assert.equal(typeof last[key], 'number', `${method} logs ${key}`);
      if (method === 'grpo_opsd') assert.ok(Math.abs((last['sdar/gate_mean'] as number) - 0.5) < 1e-6, 'β = 0 is a constant gate of 0.5');
      if (method === 'retire_opd') assert.ok(existsSync(join(dir, 'retire_opd-s0-stage1', 'checkpoints')), 'stage 1 ran first');
      console.log(`# ${method}: ${seconds.toFixed(1)} s`);
    });
  }

  test('the comparison table reads the runs back', async () => {
    const plan = comparePlan(['grpo', 'sdar'], [0]);
    const { rows, table, missing } = writeComparison(dir, plan);
    assert.deepEqual(missing, []);
    assert.deepEqual(rows.map((r) => r.method), ['grpo', 'sdar']);
    assert.equal(rows[0].passAtK[1], rows[0].finalVal.mean, 'pass@1 over one seed is the success rate');
    assert.ok(rows[1].phaseSeconds.teacher > 0 && rows[0].phaseSeconds.teacher === 0);
    assert.match(table, /\| grpo \| 0 \| 1 \|/);
    assert.ok(existsSync(join(dir, 'report.html')) && existsSync(join(dir, 'compare.json')));
    assert.match(readFileSync(join(dir, 'compare.md'), 'utf8'), /pass@1/);
  });

  test('a run that fails is reported with its log, the others still run', async () => {
    const out = mkdtempSync(join(tmpdir(), 'wgt-compare-'));
    const cli = join(ROOT, 'src', 'cli', 'main.ts');
    const results = await runComparison(out, comparePlan(['grpo'], [0, 1]), { argv: [process.execPath, cli], trainArgs: [SMOKE, 'model.path=/nonexistent'] }, 2, () => {});
    assert.deepEqual(results.map((r) => r.code), [1, 1]);
    assert.match(readFileSync(join(out, 'grpo-s0', 'train.log'), 'utf8'), /model\.path: \/nonexistent is not a Hugging Face checkpoint directory/);
  });
});
