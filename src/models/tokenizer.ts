// Tokenizers from a local Hugging Face directory (tokenizer.json + tokenizer_config.json),
// through @huggingface/transformers. The tokenizer class is built straight from the two
// JSON objects, so nothing ever reaches for the hub; the library is imported on first
// use, so code that never tokenises never loads it.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { CheckpointError } from './errors.ts';

export interface ChatMessage {
  role: string;
  content: string;
  /** Extra fields chat templates read (reasoning_content, tool_calls, ...). */
  [key: string]: unknown;
}

export interface ChatOptions {
  addGenerationPrompt?: boolean;
  /** Qwen3's template: false pre-fills an empty <think></think> block. Left out, the template's default applies. */
  enableThinking?: boolean;
  /** JSON-schema tool definitions for templates that support function calling. */
  tools?: Record<string, unknown>[];
}

export interface Tokenizer {
  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[];
  decode(ids: readonly number[], opts?: { skipSpecialTokens?: boolean }): string;
  /** The chat rendered by the tokenizer's template. */
  applyChatTemplate(messages: readonly ChatMessage[], opts?: ChatOptions & { tokenize?: false }): string;
  /** The rendered chat as ids (special tokens in the text map to their ids; nothing is added). */
  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatOptions & { tokenize: true }): number[];
  tokenToId(token: string): number | undefined;
  /** The tokenizer's eos token, plus generation_config.json's eos ids when the directory has one. */
  readonly eosTokenIds: number[];
  readonly padTokenId: number | null;
  readonly bosTokenId: number | null;
  /** Highest id + 1, counting added tokens (the model's vocab_size may be larger). */
  readonly vocabSize: number;
}

interface HfTokenizer {
  encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
  decode(ids: number[], opts?: { skip_special_tokens?: boolean }): string;
  apply_chat_template(conversation: unknown[], opts: Record<string, unknown>): unknown;
  get_vocab(): Map<string, number>;
  eos_token_id?: number;
  pad_token_id?: number;
  bos_token_id?: number;
}

function readJsonFile(file: string): Record<string, unknown> {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new CheckpointError(`${file}: cannot read tokenizer file (${(e as Error).message})`);
  }
}

function ids(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  return Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number') : [];
}

/** Loads the tokenizer in `dir` (tokenizer.json, tokenizer_config.json, optional chat_template.jinja and generation_config.json). */
export async function loadTokenizer(dir: string): Promise<Tokenizer> {
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    if (!fs.existsSync(path.join(dir, f))) throw new CheckpointError(`${dir}: ${f} not found`);
  }
  const tokenizerJson = readJsonFile(path.join(dir, 'tokenizer.json'));
  const tokenizerConfig = readJsonFile(path.join(dir, 'tokenizer_config.json'));
  const templateFile = path.join(dir, 'chat_template.jinja');
  if (tokenizerConfig.chat_template == null && fs.existsSync(templateFile)) {
    tokenizerConfig.chat_template = fs.readFileSync(templateFile, 'utf8');
  }
  const hf = await import('@huggingface/transformers');
  hf.env.allowRemoteModels = false;
  const className = String(tokenizerConfig.tokenizer_class ?? 'PreTrainedTokenizer').replace(/Fast$/, '');
  const candidate = (hf as unknown as Record<string, unknown>)[className];
  const Cls = (typeof candidate === 'function' && candidate.prototype instanceof hf.PreTrainedTokenizer ? candidate : hf.PreTrainedTokenizer) as
    new (json: unknown, config: unknown) => HfTokenizer;
  const tok = new Cls(tokenizerJson, tokenizerConfig);

  const genFile = path.join(dir, 'generation_config.json');
  const eos = [...ids(tok.eos_token_id), ...(fs.existsSync(genFile) ? ids(readJsonFile(genFile).eos_token_id) : [])];
  const vocab = tok.get_vocab();
  let maxId = -1;
  for (const id of vocab.values()) maxId = Math.max(maxId, id);

  const render = (messages: readonly ChatMessage[], opts: ChatOptions & { tokenize?: boolean }): unknown => {
    const extra: Record<string, unknown> = {};
    if (opts.enableThinking !== undefined) extra.enable_thinking = opts.enableThinking;
    if (opts.tools) extra.tools = opts.tools;
    return tok.apply_chat_template(messages.map((m) => ({ ...m })), {
      tokenize: opts.tokenize ?? false,
      add_generation_prompt: opts.addGenerationPrompt ?? false,
      return_tensor: false,
      return_dict: false,
      ...extra,
    });
  };

  return {
    encode: (text, opts = {}) => tok.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }),
    decode: (list, opts = {}) => (list.length === 0 ? '' : tok.decode([...list], { skip_special_tokens: opts.skipSpecialTokens ?? false })),
    applyChatTemplate: ((messages: readonly ChatMessage[], opts: ChatOptions & { tokenize?: boolean } = {}) => {
      const out = render(messages, opts);
      return opts.tokenize ? [...(out as number[])] : (out as string);
    }) as Tokenizer['applyChatTemplate'],
    tokenToId: (token) => vocab.get(token),
    eosTokenIds: [...new Set(eos)],
    padTokenId: tok.pad_token_id ?? null,
    bosTokenId: tok.bos_token_id ?? null,
    vocabSize: maxId + 1,
  };
}
