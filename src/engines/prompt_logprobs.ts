// Log-prob and rank of every token of given sequences after its prefix (vLLM's
// prompt_logprobs): sequences share left-padded forward batches, and the tokenRanks op
// reduces the logits on the GPU, so only [positions] log-probs and ranks come back.

import type { CausalLM } from '../models/causal_lm.ts';
import { budgetBatches, packLeft, unpack } from '../scoring/score.ts';
import { noGrad } from '../tensor/autograd.ts';
import { linear, readTokenRanks, reshape, slice, tokenRanks } from '../tensor/ops/index.ts';
import { readSampled, sampleTokens } from '../tensor/ops/sampling.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { TopLogprob } from './engine.ts';
import { scopeAsync } from '../tensor/scope.ts';

export interface PromptTokenStats {
  /** Log-probs of tokens 1..n-1. */
  logprobs: Float32Array;
  /** 1 + the number of tokens with a larger logit, for tokens 1..n-1. */
  ranks: Uint32Array;
  /** With options.top: the most likely tokens at each of positions 1..n-1, most likely first. */
  top?: TopLogprob[][];
}

export interface PromptStatsOptions {
  temperature?: number;
  /** Also the `top` most likely tokens of every position (vLLM's prompt_logprobs=N, or echo with logprobs=N). */
  top?: number;
  /** Tokens per forward batch (default 8192). */
  maxBatchTokens?: number;
  /** Bytes of logits per block of positions (default 64 MiB). */
  blockBytes?: number;
}

export async function promptTokenStats(model: CausalLM, seqs: readonly ArrayLike<number>[], opts: PromptStatsOptions = {}): Promise<PromptTokenStats[]> {
  const results: PromptTokenStats[] = seqs.map(() => ({ logprobs: new Float32Array(0), ranks: new Uint32Array(0) }));
  const scored = seqs.map((_, i) => i).filter((i) => seqs[i].length >= 2);
  const H = model.config.hidden;
  for (const group of budgetBatches(scored, (i) => seqs[i].length, opts.maxBatchTokens ?? 8192)) {
    const packed = packLeft(group.map((k) => seqs[k]));
    const n = packed.batch * (packed.seq - 1);
    const { stats, top } = await scopeAsync(async () => {
      const { ranked, used } = noGrad(() => {
        const hidden = model.hidden({ ids: packed.ids, batch: packed.batch, seq: packed.seq, padLeft: packed.padLeft });
        const used = reshape(slice(hidden, 1, 0, packed.seq - 1), [n, H]);
        return { ranked: tokenRanks(used, model.lmHead(), packed.targets, { temperature: opts.temperature, blockBytes: opts.blockBytes }), used };
      });
      return { stats: await readTokenRanks(ranked), top: opts.top ? await topTokens(model, used, opts.top, opts) : null };
    });
    const lps = unpack(packed, stats.logprobs);
    group.forEach((k, g) => {
      const start = g * (packed.seq - 1) + packed.padLeft[g];
      const end = (g + 1) * (packed.seq - 1);
      results[k] = { logprobs: lps[g], ranks: stats.ranks.slice(start, end) };
      if (top) results[k].top = top.slice(start, end);
    });
  }
  return results;
}

/** The `k` most likely tokens after each row of `hidden` [N, H], a block of rows of logits at a time. */
async function topTokens(model: CausalLM, hidden: Tensor, k: number, opts: PromptStatsOptions): Promise<TopLogprob[][]> {
  const [n] = hidden.shape;
  const vocab = model.lmHead().shape[0];
  const rows = Math.max(1, Math.floor((opts.blockBytes ?? 64 * 2 ** 20) / (4 * vocab)));
  // Temperature as tokenRanks takes it; the sampled token itself is not used.
  const row = { temperature: opts.temperature ?? 1, topP: 1, topK: 0, u: 0, topN: Math.min(k, vocab) };
  const out: TopLogprob[][] = [];
  for (let r0 = 0; r0 < n; r0 += rows) {
    const r1 = Math.min(n, r0 + rows);
    const picked = await scopeAsync(async () => {
      const logits = noGrad(() => linear(slice(hidden, 0, r0, r1), model.lmHead()));
      return readSampled(sampleTokens(logits, Array.from({ length: r1 - r0 }, () => row)));
    });
    for (let r = 0; r < r1 - r0; r++) {
      out.push(Array.from({ length: row.topN }, (_, j) => ({ id: picked.topIds[r * picked.topN + j], logprob: picked.topLogprobs[r * picked.topN + j] })));
    }
  }
  return out;
}
