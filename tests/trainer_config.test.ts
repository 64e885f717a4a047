// The training configuration: per-environment defaults
// (docs/ALGORITHMS.md section 1.7), overrides, strict keys, refusals that name the field and where the
// value came from, syntax errors with file and line, and the example files.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CliError, configWords } from '../src/cli/args.ts';
import { envPlugin } from '../envs/registry.ts';
import { EMBEDDED_RECIPE } from '../src/config/default_run.ts';
import { assertImplemented, ConfigError, configHash, ENV_NAMES, loadConfig, METHODS, validateConfig, warmupIterations, writeRunConfig } from '../src/config/config.ts';
import { RUN_CONFIG_FILE } from '../src/report/run_files.ts';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trainer-config-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, text);
  return p;
}

function refused(fn: () => unknown, ...parts: (string | RegExp)[]): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${e}`);
    for (const p of parts) {
      if (typeof p === 'string') assert.ok(e.message.includes(p), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(p)}`);
      else assert.match(e.message, p);
    }
    return true;
  });
}

describe('training config', () => {
  test('no file gives the household GRPO recipe', () => {
    const c = loadConfig();
    assert.equal(c.method, 'grpo');
    assert.equal(c.iterations, 150);
    assert.equal(c.model.path, 'models/household-tiny');
    assert.equal(c.model.lora, null);
    assert.equal(c.env.name, 'household');
    assert.deepEqual(
      [c.rollout.tasksPerIteration, c.rollout.groupSize, c.rollout.maxTurns, c.rollout.maxPromptTokens, c.rollout.maxResponseTokens, c.rollout.temperature],
      [16, 8, 50, 2048, 512, 1],
    );
    assert.deepEqual([c.algorithm.clipLow, c.algorithm.clipHigh, c.algorithm.dualClip, c.algorithm.klCoef, c.algorithm.entropyCoef, c.algorithm.invalidPenalty], [0.2, 0.2, 3, 0.01, 0.001, 0.1]);
    assert.deepEqual([c.optim.lr, c.optim.weightDecay, c.optim.betas, c.optim.gradClip, c.optim.miniBatchSize], [1e-6, 0.01, [0.9, 0.999], 1, 256]);
    assert.deepEqual([c.validation.every, c.validation.temperature, c.validation.split, c.validation.runs], [5, 0.4, 'valid_seen', 1]);
    assert.deepEqual(c.algorithm.sdar, { beta: 5, coef: 0.01 });
    assert.deepEqual(c.algorithm.rlsd, { lambdaStart: 0.5, decayIterations: 100, clipLow: 0.8, clipHigh: 1.2 });
    assert.equal(c.algorithm.skill_sd.coef, 0.001);
    assert.deepEqual([c.algorithm.retire_opd.window, c.algorithm.retire_opd.fraction], [3, 0.9]);
    assert.equal(c.algorithm.agent_opsd.granularity, 'turn');
    assert.deepEqual([c.algorithm.adrs.startIteration, c.algorithm.adrs.endIteration, c.algorithm.adrs.eta], [21, 70, 0.02]);
    assert.equal(c.output.runName, 'household-grpo-s0');
  });

  test('shop and search get their own recipes; explicit values win', () => {
    const shop = loadConfig(undefined, ['env.name=shop']);
    assert.deepEqual([shop.rollout.maxTurns, shop.rollout.maxPromptTokens, shop.optim.miniBatchSize, shop.algorithm.klCoef, shop.algorithm.invalidPenalty], [15, 4096, 64, 0.01, 0.1]);
    assert.equal(shop.algorithm.agent_opsd.granularity, 'token');
    const search = loadConfig(undefined, ['env.name=search']);
    assert.deepEqual(
      [search.rollout.tasksPerIteration, search.rollout.maxTurns, search.optim.miniBatchSize, search.algorithm.klCoef, search.algorithm.invalidPenalty, search.validation.temperature, search.validation.every],
      [128, 4, 256, 0.001, 0.01, 0, 0],
    );
    const own = loadConfig(file('own.yaml', 'env: {name: search}\nalgorithm: {klCoef: 0.05}\nrollout: {maxTurns: 6}\n'));
    assert.equal(own.algorithm.klCoef, 0.05);
    assert.equal(own.rollout.maxTurns, 6);
    assert.equal(own.algorithm.invalidPenalty, 0.01);
  });

  test('warmup counts the run\'s iterations: given, or a share of them (search warms up over 10%)', () => {
    const household = loadConfig(undefined, []);
    assert.equal(warmupIterations(household.optim, household.iterations), 0);
    const search = loadConfig(undefined, ['env.name=search']);
    assert.equal(warmupIterations(search.optim, search.iterations), 15);
    assert.equal(warmupIterations(search.optim, 40), 4, 'an SFT run of 40 steps');
    const given = loadConfig(undefined, ['env.name=search', 'optim.warmupIterations=7']);
    assert.equal(warmupIterations(given.optim, given.iterations), 7);
    assert.equal(warmupIterations(loadConfig(undefined, ['optim.warmupRatio=0.25', 'iterations=10']).optim, 10), 3);
    assert.throws(() => loadConfig(undefined, ['optim.warmupIterations=2', 'optim.warmupRatio=0.1']), /optim\.warmupRatio: set optim\.warmupIterations or optim\.warmupRatio, not both/);
    assert.throws(() => loadConfig(undefined, ['optim.warmupSteps=2']), /warmupSteps/);
  });

  test('each environment\'s recipe agrees with its agent\'s turn cap', () => {
    assert.deepEqual([...ENV_NAMES], ['household', 'shop', 'search']);
    for (const env of ENV_NAMES) assert.equal(envPlugin(env).recipe.maxTurns, envPlugin(env).agent.maxTurns, env);
  });

  test('overrides: JSON values, plain strings, nested groups, and null groups filled in', () => {
    const c = loadConfig(undefined, ['optim.lr=3e-4', 'optim.betas=[0.8,0.95]', 'output.runName=my-run', 'method=sdar', 'model.lora.r=8', 'env.url=http://localhost:8765']);
    assert.equal(c.optim.lr, 3e-4);
    assert.deepEqual(c.optim.betas, [0.8, 0.95]);
    assert.equal(c.output.runName, 'my-run');
    assert.equal(c.method, 'sdar');
    assert.deepEqual(c.model.lora, { r: 8, alpha: 32, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], useRslora: false });
    assert.equal(c.env.url, 'http://localhost:8765');
    // Later overrides win over earlier ones and over the file.
    const f = file('lr.yaml', 'optim:\n  lr: 0.001\n');
    assert.equal(loadConfig(f, ['optim.lr=0.002', 'optim.lr=0.003']).optim.lr, 0.003);
    refused(() => loadConfig(undefined, ['optim']), 'override optim', 'key.path=value');
    refused(() => loadConfig(f, ['optim.lr.x=1']), 'override optim.lr.x=1: optim.lr is 0.001, not a group of settings');
  });

  test('invalid values are refused naming the field, the value and its origin', () => {
    refused(() => loadConfig(undefined, ['optim.lr=-1']), 'optim.lr: expected a positive number, got -1 (from override optim.lr=-1)');
    refused(() => loadConfig(undefined, ['rollout.groupSize=2.5']), 'rollout.groupSize: expected an integer, got 2.5');
    refused(() => loadConfig(undefined, ['rollout.groupSize=0']), 'rollout.groupSize: expected an integer >= 1, got 0');
    refused(() => loadConfig(undefined, ['validation.runs=0']), 'validation.runs: expected an integer >= 1, got 0');
    refused(() => loadConfig(undefined, ['env.name=kitchen']), 'env.name: expected one of "household", "shop", "search", got "kitchen"');
    refused(() => loadConfig(undefined, ['method=ppo']), 'method: expected one of "grpo"', '"sft"', 'got "ppo"');
    refused(() => loadConfig(undefined, ['optim.lr=fast']), 'optim.lr: expected a number, got "fast"');
    refused(() => loadConfig(undefined, ['rollout.topP=1.5']), 'rollout.topP: expected a number <= 1, got 1.5');
    refused(() => loadConfig(undefined, ['rollout.engine=http']), 'rollout.url: required when rollout.engine is "http"');
    refused(() => loadConfig(undefined, ['env.url=ftp://x']), 'env.url: expected an http(s) URL, got "ftp://x"');
    refused(() => loadConfig(undefined, ['algorithm.dualClip=0.5']), 'algorithm.dualClip: expected 0 (off) or a number > 1');
    const f = file('bad.yaml', 'method: grpo\noptim:\n  lr: 0.01\n  weightDecay: -2\n');
    refused(() => loadConfig(f), `optim.weightDecay: expected a number >= 0, got -2 (from ${f}:4)`);
    // Several problems are all reported.
    refused(() => loadConfig(undefined, ['optim.lr=0', 'seed=-1']), 'invalid configuration:', 'optim.lr:', 'seed:');
  });

  test('command words: one config file and key=value overrides, in any order', () => {
    assert.deepEqual(configWords('train', ['optim.lr=1e-5', 'a.yaml', 'seed=2']), { file: 'a.yaml', overrides: ['optim.lr=1e-5', 'seed=2'] });
    assert.deepEqual(configWords('train', undefined), { file: undefined, overrides: [] });
    assert.throws(() => configWords('compare', ['a.yaml', 'b.yaml']), (e: Error) => e instanceof CliError && e.message === 'compare: one config file expected, got a.yaml, b.yaml');
  });

  test('unknown keys are errors, with a suggestion', () => {
    refused(() => loadConfig(undefined, ['optim.learningRate=1']), 'optim.learningRate: unknown setting', 'optim takes lr, weightDecay');
    refused(() => loadConfig(undefined, ['rollout.grupSize=4']), 'rollout.grupSize: unknown setting (did you mean "groupSize"?)');
    const f = file('unknown.yaml', 'method: grpo\nepochs: 3\n');
    refused(() => loadConfig(f), 'epochs: unknown setting', 'the top level takes method', `(from ${f}:2)`);
    refused(() => loadConfig(undefined, ['algorithm.sdar.gamma=1']), 'algorithm.sdar.gamma: unknown setting', 'algorithm.sdar takes beta, coef');
  });

  test('YAML and JSON syntax errors name the file and line', () => {
    const y = file('broken.yaml', 'method: grpo\noptim:\n  lr: [1e-5\n  weightDecay: 0.01\n');
    refused(() => loadConfig(y), new RegExp(`^${y.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+: YAML syntax error`));
    const j = file('broken.json', '{\n  "method": "grpo",\n  "seed": 1,,\n}\n');
    refused(() => loadConfig(j), `${j}:3:`, 'JSON syntax error');
    const dup = file('dup.yaml', 'seed: 1\nseed: 2\n');
    refused(() => loadConfig(dup), `${dup}:2:`);
    refused(() => loadConfig(file('list.yaml', '- 1\n- 2\n')), 'expected a mapping of settings at the top level');
    refused(() => loadConfig(path.join(tmp, 'missing.yaml')), 'missing.yaml: cannot read the config file');
    refused(() => loadConfig(file('cfg.toml', 'seed = 1\n')), 'expected a .yaml, .yml or .json file');
    const json = file('ok.json', '{"method": "grpo", "env": {"name": "shop"}, "optim": {"lr": 2e-5}}');
    const c = loadConfig(json);
    assert.equal(c.env.name, 'shop');
    assert.equal(c.optim.lr, 2e-5);
  });

  test('assertImplemented refuses other methods, listing the implemented ones', () => {
    assertImplemented('grpo', ['grpo', 'sft']);
    refused(() => assertImplemented('sdar', ['grpo', 'sft']), 'method: "sdar" is not implemented yet; implemented: grpo, sft');
    assert.ok(METHODS.includes('gigpo') && METHODS.includes('sft') && METHODS.length === 14);
  });

  test('config hash ignores run length, checkpointing and output; the resolved config round-trips', () => {
    const a = loadConfig();
    assert.equal(configHash(a), configHash(loadConfig(undefined, ['iterations=300', 'checkpoint.every=2', 'output.runName=other'])));
    assert.notEqual(configHash(a), configHash(loadConfig(undefined, ['optim.lr=2e-5'])));
    assert.notEqual(configHash(a), configHash(loadConfig(undefined, ['seed=1'])));
    const dir = path.join(tmp, 'run');
    writeRunConfig(dir, a);
    const back = validateConfig(JSON.parse(fs.readFileSync(path.join(dir, RUN_CONFIG_FILE), 'utf8')));
    assert.deepEqual(back, a);
    assert.equal(configHash(back), configHash(a));
  });

  test('a rollout correction turned off hashes as runs made before the setting: the comparison recipe is still its archived runs\'', () => {
    const archived = JSON.parse(fs.readFileSync(path.join(ROOT, 'docs', 'results', 'household', 'grpo-s0', 'run.json'), 'utf8')) as { configHash: string };
    const recipe = (more: string[] = []) => loadConfig(path.join(ROOT, 'examples', 'compare_household.yaml'), ['method=grpo', 'seed=0', ...more]);
    assert.equal(recipe().algorithm.rolloutCorrection.mode, 'off');
    assert.equal(configHash(recipe()), archived.configHash);
    assert.notEqual(configHash(recipe(['algorithm.rolloutCorrection.mode=seq-mask'])), archived.configHash, 'a correction that is on trains otherwise');
  });

  test('the example files load and say what they claim', () => {
    const ex = (name: string) => loadConfig(path.join(ROOT, 'examples', name));
    const h = ex('grpo_household.yaml');
    assert.deepEqual([h.method, h.env.name, h.iterations, h.rollout.maxTurns, h.optim.lr], ['grpo', 'household', 150, 20, 1e-4]);
    // The bundled recipe file is the embedded default written out.
    const embedded = loadConfig(undefined, [...EMBEDDED_RECIPE]);
    for (const key of ['rollout', 'optim', 'validation', 'algorithm'] as const) assert.deepEqual(h[key], embedded[key], key);
    assert.equal(ex('grpo_shop.yaml').optim.miniBatchSize, 64);
    const s = ex('grpo_search.yaml');
    assert.deepEqual([s.env.name, s.rollout.tasksPerIteration, s.algorithm.klCoef], ['search', 128, 0.001]);
    // The Qwen recipes take each environment's reference settings and lr 1e-6.
    const q = (name: string) => {
      const c = ex(name);
      return [c.env.name, c.rollout.tasksPerIteration, c.rollout.maxTurns, c.rollout.maxPromptTokens, c.optim.lr, c.optim.miniBatchSize];
    };
    assert.deepEqual(q('qwen_household.yaml'), ['household', 16, 50, 2048, 1e-6, 256]);
    assert.deepEqual(q('qwen_shop.yaml'), ['shop', 16, 15, 4096, 1e-6, 64]);
    assert.deepEqual(q('qwen_search.yaml'), ['search', 128, 4, 4096, 1e-6, 256]);
    assert.equal(ex('qwen_search.yaml').optim.warmupRatio, 0.1);
    for (const method of METHODS) {
      const smoke = loadConfig(path.join(ROOT, 'examples', 'smoke.yaml'), [`method=${method}`]);
      assert.deepEqual([smoke.iterations, smoke.rollout.tasksPerIteration, smoke.rollout.groupSize, smoke.method], [1, 2, 2, method]);
    }
  });
});
