// A tiny Qwen2 checkpoint whose weights make it search: every turn, sampled at any
// temperature, it answers `<search> QUERY </search>` and ends the turn. Its layers
// write nothing to the residual stream (o_proj and down_proj are zero), so the logits
// depend on the last token alone, and the untied LM head maps each token of that chain
// to the next with a margin no sampling crosses. It lets the trainer's own engine drive
// the search environment and a retriever through the CLI, which the bundled household
// models cannot (they never search).

import { randn } from '../../src/util/random.ts';
import { exportCheckpoint, expectedShapes } from '../../src/hf_model/checkpoint.ts';
import { configFromPreset } from '../../src/hf_model/presets.ts';
import { loadTokenizer } from '../../src/tokenizer/tokenizer.ts';
import { buildWordTokenizer, END_OF_TEXT, IM_END, writeTokenizerFiles } from '../../src/tokenizer/word_tokenizer.ts';
import { renderSearchPrompt } from '../../envs/search/prompt.ts';
import { SEARCH_ACTIONS } from '../../envs/search/env.ts';

const HIDDEN = 64;
/** The winning logit; every other stays within a few units of 0. */
const MARGIN = 40;

/** Writes the model to `dir`; its vocabulary covers the search prompts of `questions` word by word. */
export async function searcherModel(dir: string, query: string, questions: readonly string[]): Promise<void> {
  const response = `<search> ${query} </search>`;
  const prompts = questions.map((task) => renderSearchPrompt({ task, history: [], observation: task, admissibleActions: SEARCH_ACTIONS }));
  writeTokenizerFiles(dir, buildWordTokenizer([response, ...prompts], { modelMaxLength: 4096 }));
  const tokenizer = await loadTokenizer(dir);
  const generationPrompt = tokenizer.encode('<|im_start|>assistant\n', { addSpecialTokens: false });
  const eos = tokenizer.tokenToId(IM_END);
  const chain: number[] = [generationPrompt.at(-1)!, ...tokenizer.encode(response, { addSpecialTokens: false }), eos!];
  const config = configFromPreset('qwen2.5-0.5b', {
    vocab_size: tokenizer.vocabSize, hidden_size: HIDDEN, intermediate_size: 64, num_hidden_layers: 1, max_window_layers: 1,
    num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 4096, sliding_window: 4096, rope_theta: 10000,
    tie_word_embeddings: false, bos_token_id: tokenizer.tokenToId(END_OF_TEXT), eos_token_id: eos, pad_token_id: tokenizer.tokenToId(END_OF_TEXT),
  });
  const vocab = config.vocabSize;
  const embed = randn(vocab * HIDDEN, 1);
  const head = new Float32Array(vocab * HIDDEN);
  chain.forEach((token, i) => {
    if (i + 1 === chain.length) return;
    const from = embed.subarray(token * HIDDEN, (token + 1) * HIDDEN);
    const norm2 = from.reduce((s, x) => s + x * x, 0);
    // After the final RMSNorm the last token's state is its embedding scaled to RMS 1: the row aligned with it scores MARGIN.
    for (let d = 0; d < HIDDEN; d++) head[chain[i + 1] * HIDDEN + d] = (MARGIN * from[d] * Math.sqrt(norm2 / HIDDEN)) / norm2;
  });
  let seed = 2;
  const tensors = [...expectedShapes(config)].map(([name, shape]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    let data: Float32Array;
    if (name === 'model.embed_tokens.weight') data = embed;
    else if (name === 'lm_head.weight') data = head;
    else if (name.endsWith('norm.weight')) data = new Float32Array(n).fill(1);
    else if (name.endsWith('.bias') || name.endsWith('o_proj.weight') || name.endsWith('down_proj.weight')) data = new Float32Array(n);
    else data = randn(n, seed++, 0.02);
    return [name, data, shape] as const;
  });
  await exportCheckpoint(dir, config, tensors, { tokenizerDir: dir });
}
