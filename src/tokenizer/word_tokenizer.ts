// A small word-level tokenizer for models this project trains from scratch, written
// as a Hugging Face tokenizer.json that transformers (Python and JS) and vLLM load
// unchanged.
//
// It is a BPE model with no merges, `ignore_merges` and byte fallback: a pre-tokenized
// piece that is in the vocabulary (" cabinet", "<think>", " 1") is one token; any other
// piece falls apart into single characters, and characters outside the vocabulary into
// UTF-8 byte tokens <0xNN>, so every text encodes and decodes back unchanged. The
// vocabulary is the pieces of a corpus (the environment's prompts and responses).
// Qwen's ChatML special tokens and a ChatML chat template make it a drop-in for the
// Qwen prompt path (rollout/tokenize_turn.ts).

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';

export const END_OF_TEXT = '<|endoftext|>';
export const IM_START = '<|im_start|>';
export const IM_END = '<|im_end|>';
export const SPECIAL_TOKENS = [END_OF_TEXT, IM_START, IM_END] as const;

/**
 * The pre-tokenizer: tags (<think>, </action>) and words with an optional leading
 * space, digits one at a time (any number encodes with ten tokens), punctuation with
 * an optional leading space, newlines one at a time, runs of spaces. Plain enough for
 * both Oniguruma (Rust tokenizers) and JavaScript regular expressions.
 */
export const PRE_TOKENIZE_PATTERN = String.raw` ?</?[A-Za-z_]+>| ?[A-Za-z]+| ?[0-9]| ?[^A-Za-z0-9\s]|\n| +|\s`;

/**
 * ChatML as Qwen writes it, without Qwen2.5's default system prompt (fewer tokens per
 * turn for a small model): a system message only when the conversation has one.
 */
export const CHAT_TEMPLATE =
  "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/** The roles the chat template writes after <|im_start|>: always in the vocabulary. */
const CHAT_ROLES = ['system', 'user', 'assistant'];

const PIECE = new RegExp(PRE_TOKENIZE_PATTERN, 'gu');

/** The pieces the tokenizer's pre-tokenizer cuts `text` into (text between matches stays a piece, as in HF's Isolated split). */
export function preTokenize(text: string): string[] {
  const out: string[] = [];
  let at = 0;
  for (const m of text.matchAll(PIECE)) {
    if (m.index > at) out.push(text.slice(at, m.index));
    if (m[0].length > 0) out.push(m[0]);
    at = m.index + m[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

export const byteToken = (b: number): string => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;

/** Characters every vocabulary holds, so English text never needs byte tokens. */
function baseCharacters(): string[] {
  const chars = ['\n', '\t'];
  for (let c = 0x20; c < 0x7f; c++) chars.push(String.fromCharCode(c));
  return chars;
}

export interface WordTokenizerOptions {
  /** Pieces seen fewer times than this are left to spell out (default 1: keep all). */
  minCount?: number;
  /** Largest sequence the model takes, written as model_max_length (default 2048). */
  modelMaxLength?: number;
}

export interface WordTokenizerFiles {
  /** tokenizer.json */
  tokenizer: Record<string, unknown>;
  /** tokenizer_config.json */
  config: Record<string, unknown>;
  /** Ids in use: bytes, characters, words and special tokens. */
  vocabSize: number;
  /** Multi-character pieces learned from the corpus. */
  words: number;
}

/**
 * Builds the tokenizer files from a corpus. Ids: the 256 byte tokens, then printable
 * ASCII, then the corpus's pieces by descending count (ties in code-point order, so the
 * same corpus always gives the same ids), then the special tokens.
 */
export function buildWordTokenizer(corpus: Iterable<string>, opts: WordTokenizerOptions = {}): WordTokenizerFiles {
  const minCount = opts.minCount ?? 1;
  if (!(Number.isInteger(minCount) && minCount >= 1)) throw new RangeError(`buildWordTokenizer: minCount must be an integer >= 1, got ${minCount}`);
  const counts = new Map<string, number>();
  for (const text of [...CHAT_ROLES.map((role) => `${role}\n`), ...corpus]) {
    for (const piece of preTokenize(text)) counts.set(piece, (counts.get(piece) ?? 0) + 1);
  }
  const vocab: Record<string, number> = {};
  const add = (token: string) => {
    if (!(token in vocab)) vocab[token] = Object.keys(vocab).length;
  };
  for (let b = 0; b < 256; b++) add(byteToken(b));
  for (const c of baseCharacters()) add(c);
  const words = [...counts]
    .filter(([piece, n]) => n >= minCount && [...piece].length > 1 && !(SPECIAL_TOKENS as readonly string[]).includes(piece))
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  for (const [piece] of words) add(piece);
  // Single characters of the corpus outside ASCII get their own ids too (one token, not several bytes).
  for (const [piece, n] of counts) if (n >= minCount && [...piece].length === 1) add(piece);
  const first = Object.keys(vocab).length;
  const added = SPECIAL_TOKENS.map((content, i) => ({
    id: first + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: PRE_TOKENIZE_PATTERN }, behavior: 'Isolated', invert: false },
    post_processor: null,
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Fuse' }] },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: true,
      ignore_merges: true,
      vocab,
      merges: [],
    },
  };
  const config = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: Object.fromEntries(added.map(({ id, ...rest }) => [String(id), rest])),
    bos_token: null,
    chat_template: CHAT_TEMPLATE,
    // Decoding must give back the exact text (the action parser reads it); HF's cleanup drops spaces before punctuation.
    clean_up_tokenization_spaces: false,
    eos_token: IM_END,
    errors: 'replace',
    model_max_length: opts.modelMaxLength ?? 2048,
    pad_token: END_OF_TEXT,
    split_special_tokens: false,
    tokenizer_class: 'PreTrainedTokenizerFast',
    unk_token: null,
  };
  return { tokenizer, config, vocabSize: first + added.length, words: words.length };
}

/** Writes tokenizer.json and tokenizer_config.json into `dir` (created if missing). */
export function writeTokenizerFiles(dir: string, files: WordTokenizerFiles): void {
  storage().makeDir(dir);
  storage().writeAtomic(path.join(dir, 'tokenizer.json'), JSON.stringify(files.tokenizer, null, 2) + '\n');
  storage().writeAtomic(path.join(dir, 'tokenizer_config.json'), JSON.stringify(files.config, null, 2) + '\n');
}

/**
 * An encoder for a tokenizer.json in exactly the form buildWordTokenizer writes, or
 * null for any other. Encoding such a tokenizer is a split at the special tokens, the
 * pre-tokenizer's pieces, and a vocabulary lookup per piece (a piece outside it falls
 * apart into characters, and those outside it into byte tokens), which is what the
 * generic pipeline computes too, at a fraction of its cost: the household rollouts
 * encode about a million prompt tokens an iteration, where the generic path took
 * about 0.35 s of host time (Bun, 2 cores), and a validation four times as many.
 * tests/tokenizer.test.ts holds the two to the same ids.
 */
/** Lines whose ids an encoder keeps (a few MB). */
const LINE_CACHE_ENTRIES = 65536;

export function wordTokenizerEncoder(tokenizerJson: unknown): ((text: string) => number[]) | null {
  const t = tokenizerJson as Record<string, any>;
  const m = t?.model;
  const pre = t?.pre_tokenizer;
  const plain = t && t.normalizer === null && t.post_processor === null &&
    pre?.type === 'Split' && pre.pattern?.Regex === PRE_TOKENIZE_PATTERN && pre.behavior === 'Isolated' && pre.invert === false &&
    m?.type === 'BPE' && Array.isArray(m.merges) && m.merges.length === 0 && m.ignore_merges === true && m.byte_fallback === true &&
    m.dropout == null && m.unk_token == null && m.continuing_subword_prefix == null && m.end_of_word_suffix == null &&
    m.vocab && typeof m.vocab === 'object' && Array.isArray(t.added_tokens) &&
    t.added_tokens.every((a: any) => typeof a?.content === 'string' && a.content !== '' && Number.isInteger(a.id) &&
      a.special === true && a.normalized === false && !a.lstrip && !a.rstrip && !a.single_word);
  if (!plain) return null;
  const vocab = new Map<string, number>(Object.entries(m.vocab as Record<string, number>));
  const added = new Map<string, number>(t.added_tokens.map((a: { content: string; id: number }) => [a.content, a.id]));
  // Longest first, as the added-token split matches them.
  const specials = added.size
    ? new RegExp([...added.keys()].sort((a, b) => b.length - a.length).map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g')
    : null;
  const bytes = new TextEncoder();
  const pieceIds = (piece: string, out: number[]) => {
    const whole = vocab.get(piece);
    if (whole !== undefined) return void out.push(whole);
    for (const ch of piece) {
      const id = vocab.get(ch);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      for (const b of bytes.encode(ch)) {
        const byte = vocab.get(byteToken(b));
        if (byte === undefined) throw new Error(`word tokenizer: the vocabulary has no byte token ${byteToken(b)}`);
        out.push(byte);
      }
    }
  };
  // preTokenize's pieces, looked up as they are matched (no list of them in between).
  const piece = new RegExp(PRE_TOKENIZE_PATTERN, 'gu');
  const encodeLine = (text: string, out: number[]) => {
    piece.lastIndex = 0;
    let at = 0;
    for (let m = piece.exec(text); m !== null; m = piece.exec(text)) {
      if (m.index > at) pieceIds(text.slice(at, m.index), out);
      pieceIds(m[0], out);
      at = piece.lastIndex;
    }
    if (at < text.length) pieceIds(text.slice(at), out);
  };
  // The pattern makes every newline a piece of its own and looks neither behind nor
  // past one, so a text encodes line by line, and lines recur (a prompt's task, its
  // admissible actions, the turns it shows again): their ids are kept, up to a bound.
  const lines = new Map<string, number[]>();
  const newline: number[] = [];
  pieceIds('\n', newline);
  const encodeText = (text: string, out: number[]) => {
    let at = 0;
    for (;;) {
      const end = text.indexOf('\n', at);
      const line = text.slice(at, end < 0 ? text.length : end);
      let ids = lines.get(line);
      if (!ids) {
        encodeLine(line, (ids = []));
        if (lines.size >= LINE_CACHE_ENTRIES) lines.clear();
        lines.set(line, ids);
      }
      for (const id of ids) out.push(id);
      if (end < 0) return;
      for (const id of newline) out.push(id);
      at = end + 1;
    }
  };
  return (text: string) => {
    const out: number[] = [];
    if (!specials) {
      encodeText(text, out);
      return out;
    }
    let at = 0;
    for (const s of text.matchAll(specials)) {
      if (s.index > at) encodeText(text.slice(at, s.index), out);
      out.push(added.get(s[0])!);
      at = s.index + s[0].length;
    }
    if (at < text.length) encodeText(text.slice(at), out);
    return out;
  };
}
