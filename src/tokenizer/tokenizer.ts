// Tokenizers from a local Hugging Face directory (tokenizer.json + tokenizer_config.json),
// through the two pure-JavaScript parts of transformers.js: @huggingface/tokenizers runs
// tokenizer.json and @huggingface/jinja renders the chat template. transformers.js itself
// adds nothing for the Qwen tokenizers (its PreTrainedTokenizer wraps these same two) but
// pulls in onnxruntime and sharp, native packages a trainer has no use for. What follows
// mirrors its PreTrainedTokenizer where it adds to the two: the pad token falls back to
// eos, and the template sees the special tokens by name.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { Template } from '@huggingface/jinja';
import { Tokenizer as TokenizerJson } from '@huggingface/tokenizers';
import { templateContentFormat, type ContentFormat } from './content_format.ts';
import { wordTokenizerEncoder } from './word_tokenizer.ts';

/** A tokenizer directory this code cannot read: a missing or malformed file, or no usable chat template; the message names the file. */
export class TokenizerError extends Error {
  override name = 'TokenizerError';
}

/** A text part of a message, as OpenAI's API sends them and templates that loop over content read them. */
export interface ChatTextPart {
  type: 'text';
  text: string;
}

export interface ChatMessage {
  role: string;
  content: string | readonly ChatTextPart[];
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
  /** How a chat server hands the default chat template a message's content parts (content_format.ts). */
  readonly contentFormat: ContentFormat;
  /** The tokenizer's eos token, plus generation_config.json's eos ids when the directory has one. */
  readonly eosTokenIds: number[];
  readonly padTokenId: number | null;
  readonly bosTokenId: number | null;
  /** Highest id + 1, counting added tokens (the model's vocab_size may be larger). */
  readonly vocabSize: number;
}

function readJsonFile(file: string): Record<string, unknown> {
  try {
    return JSON.parse(storage().readText(file));
  } catch (e) {
    throw new TokenizerError(`${file}: cannot read tokenizer file (${(e as Error).message})`);
  }
}

/** The special tokens a chat template may name (transformers passes these by name). */
const SPECIAL_TOKEN_NAMES = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/** A special token of tokenizer_config.json, written as a string or as an AddedToken object. */
function tokenFromConfig(config: Record<string, unknown>, key: string): string | null {
  const v = config[key];
  if (typeof v === 'string' && v) return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return null;
}

/** tokenizer_config.json's chat_template by name: one string is 'default'; a list of {name, template} names each. */
function chatTemplates(value: unknown, dir: string): Record<string, string> {
  if (value == null) return {};
  if (typeof value === 'string') return { default: value };
  if (Array.isArray(value) && value.every((t) => typeof t?.name === 'string' && typeof t?.template === 'string')) {
    return Object.fromEntries(value.map((t: { name: string; template: string }) => [t.name, t.template]));
  }
  throw new TokenizerError(`${dir}: tokenizer_config.json chat_template must be a string or a list of {name, template}`);
}

function ids(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  return Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number') : [];
}

/**
 * The directory's chat templates in transformers' order: tokenizer_config.json's
 * chat_template, then a chat_template.jinja file in place of its default, then each
 * additional_chat_templates/<name>.jinja by name. chat_template.json is a processor's
 * file, which a tokenizer does not read.
 */
function readChatTemplates(dir: string, config: Record<string, unknown>): Record<string, string> {
  const templates = chatTemplates(config.chat_template, dir);
  const file = path.join(dir, 'chat_template.jinja');
  if (storage().exists(file)) templates.default = storage().readText(file);
  const extra = path.join(dir, 'additional_chat_templates');
  if (storage().stat(extra)?.isDirectory) {
    for (const f of storage().list(extra).sort()) {
      if (f.endsWith('.jinja')) templates[f.slice(0, -'.jinja'.length)] = storage().readText(path.join(extra, f));
    }
  }
  return templates;
}

/** Loads the tokenizer in `dir` (tokenizer.json, tokenizer_config.json, optional chat_template.jinja, additional_chat_templates/ and generation_config.json). */
export async function loadTokenizer(dir: string): Promise<Tokenizer> {
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    if (!storage().exists(path.join(dir, f))) throw new TokenizerError(`${dir}: ${f} not found`);
  }
  const tokenizerJson = readJsonFile(path.join(dir, 'tokenizer.json'));
  const tokenizerConfig = readJsonFile(path.join(dir, 'tokenizer_config.json'));
  const templates = readChatTemplates(dir, tokenizerConfig);
  const tok = new TokenizerJson(tokenizerJson, { ...tokenizerConfig, chat_template: templates.default ?? null });
  const compiled = new Map<string, Template>();
  const specialTokens = Object.fromEntries(
    SPECIAL_TOKEN_NAMES.map((name) => [name, tokenFromConfig(tokenizerConfig, name)]).filter(([, v]) => v !== null),
  ) as Record<string, string>;
  const idOf = (token: string | null) => (token === null ? null : tok.token_to_id(token) ?? null);
  const eosToken = tokenFromConfig(tokenizerConfig, 'eos_token');
  const genFile = path.join(dir, 'generation_config.json');
  const eosId = idOf(eosToken);
  const eos = [...(eosId === null ? [] : [eosId]), ...(storage().exists(genFile) ? ids(readJsonFile(genFile).eos_token_id) : [])];
  const vocab = tok.get_vocab();
  const known = new Set(vocab.values());
  let maxId = -1;
  for (const id of known) maxId = Math.max(maxId, id);

  const render = (messages: readonly ChatMessage[], opts: ChatOptions): string => {
    const name = opts.tools && 'tool_use' in templates ? 'tool_use' : 'default';
    const source = templates[name];
    if (source === undefined) {
      const names = Object.keys(templates);
      throw new TokenizerError(`${dir}: ${names.length ? `no chat template named default (it has ${names.join(', ')})` : 'the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)'}`);
    }
    let template = compiled.get(name);
    if (!template) compiled.set(name, (template = new Template(source)));
    const extra: Record<string, unknown> = {};
    if (opts.enableThinking !== undefined) extra.enable_thinking = opts.enableThinking;
    return template.render({
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: opts.addGenerationPrompt ?? false,
      tools: opts.tools ?? null,
      documents: null,
      ...specialTokens,
      ...extra,
    });
  };
  // This project's own word-level tokenizers add no special tokens, so both readings of addSpecialTokens encode alike.
  const fast = wordTokenizerEncoder(tokenizerJson);
  const encode = fast ? (text: string) => fast(text) : (text: string, addSpecialTokens: boolean) => tok.encode(text, { add_special_tokens: addSpecialTokens }).ids;

  return {
    encode: (text, opts = {}) => encode(text, opts.addSpecialTokens ?? true),
    // A model's embedding may have more rows than the tokenizer has tokens (Qwen2.5:
    // 151,936 against 151,665). An id without a token, which an untrained or freshly
    // initialised model can sample, decodes to nothing, as vLLM's detokenizer does.
    decode: (list, opts = {}) => {
      const valid = list.filter((id) => known.has(id));
      return valid.length === 0 ? '' : tok.decode(valid, { skip_special_tokens: opts.skipSpecialTokens ?? false });
    },
    applyChatTemplate: ((messages: readonly ChatMessage[], opts: ChatOptions & { tokenize?: boolean } = {}) => {
      const text = render(messages, opts);
      return opts.tokenize ? encode(text, false) : text;
    }) as Tokenizer['applyChatTemplate'],
    tokenToId: (token) => vocab.get(token),
    contentFormat: templates.default === undefined ? 'string' : templateContentFormat(templates.default),
    eosTokenIds: [...new Set(eos)],
    padTokenId: idOf(tokenFromConfig(tokenizerConfig, 'pad_token') ?? eosToken),
    bosTokenId: idOf(tokenFromConfig(tokenizerConfig, 'bos_token')),
    vocabSize: maxId + 1,
  };
}
