// Log-prob and rank of every token of given sequences after its prefix (vLLM's
// prompt_logprobs): sequences share left-padded forward batches, and the tokenRanks op
// reduces the logits on the GPU, so only [positions] log-probs and ranks come back.

import type { CausalLM } from '../models/causal_lm.ts';
import { budgetGroups, packLeft, unpack } from '../models/score.ts';
import { noGrad } from '../tensor/autograd.ts';
import { readTokenRanks, reshape, slice, tokenRanks } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';

export interface PromptTokenStats {
  /** Log-probs of tokens 1..n-1. */
  logprobs: Float32Array;
  /** 1 + the number of tokens with a larger logit, for tokens 1..n-1. */
  ranks: Uint32Array;
}

export interface PromptStatsOptions {
  temperature?: number;
  /** Tokens per forward batch (default 8192). */
  maxBatchTokens?: number;
  /** Bytes of logits per block of positions (default 64 MiB). */
  blockBytes?: number;
}

export async function promptTokenStats(model: CausalLM, seqs: readonly ArrayLike<number>[], opts: PromptStatsOptions = {}): Promise<PromptTokenStats[]> {
  const results: PromptTokenStats[] = seqs.map(() => ({ logprobs: new Float32Array(0), ranks: new Uint32Array(0) }));
  const scored = seqs.map((_, i) => i).filter((i) => seqs[i].length >= 2);
  const H = model.config.hidden;
  for (const group of budgetGroups(scored, seqs, opts.maxBatchTokens ?? 8192)) {
    const packed = packLeft(group.map((k) => seqs[k]));
    const n = packed.batch * (packed.seq - 1);
    const stats = await scopeAsync(async () => {
      const ranked = noGrad(() => {
        const hidden = model.hidden({ ids: packed.ids, batch: packed.batch, seq: packed.seq, padLeft: packed.padLeft });
        const used = reshape(slice(hidden, 1, 0, packed.seq - 1), [n, H]);
        return tokenRanks(used, model.lmHead(), packed.targets, { temperature: opts.temperature, blockBytes: opts.blockBytes });
      });
      return readTokenRanks(ranked);
    });
    const lps = unpack(packed, stats.logprobs);
    group.forEach((k, g) => {
      const start = g * (packed.seq - 1) + packed.padLeft[g];
      results[k] = { logprobs: lps[g], ranks: stats.ranks.slice(start, (g + 1) * (packed.seq - 1)) };
    });
  }
  return results;
}
