import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { thinkingFormat } from '../src/tokenizer/thinking.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { ExpertEngine } from '../src/engines/expert_engine.ts';
import { envPlugin } from '../envs/registry.ts';
import { parseAction } from '../envs/think_action.ts';
import { familyDir } from './support/qwen_templates.ts';

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'thinking-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

describe('thinking format read off the template', () => {
  test('Qwen2.5 has no switch; Qwen3 pre-fills an empty block when off; Qwen3.5 also opens one when on', async () => {
    const q25 = await loadTokenizer(familyDir('qwen2.5', tmpRoot));
    const q3 = await loadTokenizer(familyDir('qwen3', tmpRoot));
    const q35 = await loadTokenizer(familyDir('qwen3.5', tmpRoot));
    for (const mode of ['off', 'on', 'default'] as const) assert.deepEqual({ ...thinkingFormat(q25, mode), mode: 'x' }, { mode: 'x', enableThinking: mode === 'off' ? false : mode === 'on' ? true : undefined, reasoning: 'tags', opened: '' });
    assert.deepEqual([thinkingFormat(q3, 'off').reasoning, thinkingFormat(q3, 'on').reasoning, thinkingFormat(q3, 'default').reasoning], ['none', 'native', 'native']);
    assert.equal(thinkingFormat(q3, 'on').opened, '');
    assert.deepEqual([thinkingFormat(q35, 'off').opened, thinkingFormat(q35, 'on').opened, thinkingFormat(q35, 'default').opened], ['', '<think>\n', '<think>\n']);
    assert.equal(thinkingFormat(q35, 'off').reasoning, 'none');
  });
});

describe('environment prompts follow the reasoning format', () => {
  const input = { task: 'put a mug on the desk', history: [], observation: 'You are in a room.', admissibleActions: ['look'] };
  for (const env of ['household', 'shop', 'search']) {
    test(env, () => {
      const spec = envPlugin(env).agent;
      const tags = spec.renderPrompt({ ...input, reasoning: 'tags' });
      assert.equal(spec.renderPrompt(input), tags, 'tags is the default, the reference wording');
      assert.match(tags, /<think> <\/think>/);
      const native = spec.renderPrompt({ ...input, reasoning: 'native' });
      assert.doesNotMatch(native, /<think>/);
      assert.match(native, /reason|Think step by step/i);
      const none = spec.renderPrompt({ ...input, reasoning: 'none' });
      assert.doesNotMatch(none, /<think>|reason|Think step/i);
    });
  }

  test('the answer format and its validity: no think block is required with thinking off', () => {
    const spec = envPlugin('household').agent;
    assert.equal(spec.formatResponse('why', 'look', 'none'), '<action>look</action>');
    assert.equal(spec.formatResponse('why', 'look', 'native'), '<think>\nwhy\n</think>\n\n<action>look</action>');
    assert.equal(spec.formatResponse('why', 'look'), '<think>\nwhy\n</think>\n<action>look</action>');
    assert.equal(parseAction('<action>look</action>', 30, 'none').valid, true);
    assert.equal(parseAction('<action>look</action>', 30, 'tags').valid, false);
    assert.equal(parseAction('<action>look</action>', 30, 'native').valid, false);
  });

  test('the expert continues what the prompt opened', async () => {
    const tok = await loadTokenizer(familyDir('qwen3.5', tmpRoot));
    const spec = envPlugin('household').agent;
    const engine = new ExpertEngine(tok, spec, thinkingFormat(tok, 'on'));
    const context = { env: 'household', trajectoryId: 't', turn: 0, task: 'look around', taskType: 't', observation: '', admissibleActions: ['look'], info: { won: false, task_type: 't', expert_action: 'look' } };
    const text = engine.respond(context);
    assert.ok(!text.startsWith('<think>') && text.includes('\n</think>\n\n<action>look</action>'), text);
    assert.equal(spec.parse(`<think>\n${text}`, 'native').valid, true);
  });
});
