// A small BPE tokenizer written to a temp directory for the fixture models (which ship
// none): printable ASCII characters, two-letter merges, filler tokens up to the model's
// vocabulary, one special end token (by default the last id), and optionally a chat
// template.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadTokenizer, type Tokenizer } from '../../src/tokenizer/tokenizer.ts';

export async function tinyTokenizer(dir: string, vocabSize: number, opts: { eosId?: number; chatTemplate?: string } = {}): Promise<Tokenizer> {
  const eosId = opts.eosId ?? vocabSize - 1;
  const vocab: Record<string, number> = {};
  const merges: string[] = [];
  const letters = 'etaoinshrdlu';
  const chars = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
  const pairs = [...letters].flatMap((a) => [...letters].map((b) => [a, b] as const));
  let next = 0;
  const take = () => {
    if (next === eosId) next++;
    return next++;
  };
  for (const c of chars) vocab[c] = take();
  for (const [a, b] of pairs) {
    if (next >= vocabSize - 1) break;
    vocab[a + b] = take();
    merges.push(`${a} ${b}`);
  }
  while (next < vocabSize) {
    const id = take();
    if (id < vocabSize) vocab[`<x${id}>`] = id;
  }
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{ id: eosId, content: '<|end|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: '\\s' }, behavior: 'Isolated', invert: false },
    post_processor: null,
    decoder: { type: 'Fuse' },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  const config: Record<string, unknown> = { tokenizer_class: 'PreTrainedTokenizer', eos_token: '<|end|>' };
  if (opts.chatTemplate) config.chat_template = opts.chatTemplate;
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  return loadTokenizer(dir);
}
