// Settings refused, or warned about, with a message that names the field, the value and
// where it came from: a run name that is a path, a negative learning rate (alone, not
// also blamed on optim.minLr), a prompt budget above the model's context, one run per
// task for a method that then learns nothing.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configWarnings, loadConfig } from '../src/config/config.ts';
import { checkModelContext } from '../src/run/model_context.ts';

const refusal = (file: string | undefined, overrides: string[]): string => {
  try {
    loadConfig(file, overrides);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error(`accepted: ${overrides.join(' ')}`);
};

describe('config refusals', () => {
  test('output.runName must be a name, not a path', () => {
    for (const name of ['../x', '..', '.', 'a/b']) {
      assert.equal(refusal(undefined, [`output.runName=${name}`]),
        `output.runName: expected a name of letters, digits, ".", "_" or "-" (a directory under output.dir, not a path), got ${JSON.stringify(name)} (from override output.runName=${name})`);
    }
    assert.equal(loadConfig(undefined, ['output.runName=run-1.b_2']).output.runName, 'run-1.b_2');
  });

  test('optim.lr=-1 is refused as itself, from where it was set', () => {
    assert.equal(refusal('examples/grpo_household.yaml', ['optim.lr=-1']), 'optim.lr: expected a positive number, got -1 (from override optim.lr=-1)');
    assert.equal(refusal('examples/grpo_household.yaml', ['optim.minLr=1']), 'optim.minLr: must not exceed optim.lr (0.0001), got 1 (from override optim.minLr=1)');
  });

  test('a prompt budget above the model\'s context is refused; the context itself is not', () => {
    const cfg = (prompt: number, response = 32) => loadConfig('examples/smoke.yaml', [`rollout.maxPromptTokens=${prompt}`, `rollout.maxResponseTokens=${response}`]);
    assert.throws(() => checkModelContext(cfg(4096)),
      /^Error: rollout\.maxPromptTokens: 4096 is more than models\/household-micro's context of 2048 tokens \(max_position_embeddings\); set it to 2048 or less \(each turn's prompt is held to the context less rollout\.maxResponseTokens, 2016 tokens here, whatever it says\)$/);
    checkModelContext(cfg(2048));
    assert.throws(() => checkModelContext(cfg(1024, 2048)), /rollout\.maxResponseTokens: 2048 leaves no room for a prompt in models\/household-micro's context of 2048 tokens/);
  });

  test('one run per task: refused where the method learns only from the group, a warning where a teacher still teaches', () => {
    for (const method of ['grpo', 'dr_grpo', 'gigpo', 'skill_grpo', 'retire_opd']) {
      assert.match(refusal('examples/smoke.yaml', [`method=${method}`, 'rollout.groupSize=1']),
        /^rollout\.groupSize: 1 refused: \w+ learns only from GRPO's group-relative advantage, and with one run per task the group is one episode's turns, .*; set rollout\.groupSize to 2 or more \(from override rollout\.groupSize=1\)$/);
    }
    assert.match(configWarnings(loadConfig('examples/smoke.yaml', ['method=sdar', 'rollout.groupSize=1'])).join('\n'), /^rollout\.groupSize 1: .*; sdar still learns from its teacher's term$/);
    assert.deepEqual(configWarnings(loadConfig('examples/smoke.yaml', ['method=opsd', 'rollout.groupSize=1'])), [], 'opsd has no policy gradient to lose');
    assert.deepEqual(configWarnings(loadConfig('examples/smoke.yaml', ['method=sdar'])), []);
  });
});
