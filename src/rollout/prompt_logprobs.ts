// Log-prob and rank of every token of given sequences after its prefix (vLLM's
// prompt_logprobs). The rank needs the whole vocabulary row, so the logits are made
// for a block of positions at a time from the final hidden states and reduced on the
// GPU; only [positions] log-probs and ranks come back.

import type { CausalLM } from '../models/causal_lm.ts';
import { budgetGroups, packLeft, unpack } from '../models/score.ts';
import { forwardMatmul } from '../kernels/matmul/precision.ts';
import * as sk from '../kernels/sampling.ts';
import { noGrad } from '../tensor/autograd.ts';
import { reshape, slice } from '../tensor/ops/index.ts';
import { inverseTemperature } from '../tensor/ops/logprob.ts';
import { scopeAsync } from '../tensor/scope.ts';
import { empty, tensor } from '../tensor/tensor.ts';

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
  const invT = inverseTemperature('promptTokenStats', opts.temperature);
  const results: PromptTokenStats[] = seqs.map(() => ({ logprobs: new Float32Array(0), ranks: new Uint32Array(0) }));
  const scored = seqs.map((_, i) => i).filter((i) => seqs[i].length >= 2);
  const V = model.config.vocabSize;
  const H = model.config.hidden;
  for (const group of budgetGroups(scored, seqs, opts.maxBatchTokens ?? 8192)) {
    const packed = packLeft(group.map((k) => seqs[k]));
    const bytes = await scopeAsync(async () => {
      const n = packed.batch * (packed.seq - 1);
      const out = noGrad(() => {
        const hidden = model.hidden({ ids: packed.ids, batch: packed.batch, seq: packed.seq, padLeft: packed.padLeft });
        const used = reshape(slice(hidden, 1, 0, packed.seq - 1), [n, H]);
        const rt = used.storage.rt;
        const targets = tensor(packed.targets, [n], 'i32');
        const stats = empty([2 * n], 'u32');
        const block = Math.max(1, Math.min(n, Math.floor(Math.min(opts.blockBytes ?? 64 * 2 ** 20, rt.gpu.limits.maxStorageBufferBindingSize) / (4 * V))));
        const logits = empty([block, V]);
        for (let r0 = 0; r0 < n; r0 += block) {
          const rows = Math.min(block, n - r0);
          forwardMatmul(rt, { a: used.buffer, b: model.lmHead().buffer, out: logits.buffer, m: rows, n: V, k: H, transB: true, offsetA: r0 * H });
          sk.tokenStats(rt, logits.buffer, targets.buffer, stats.buffer, { rows, vocab: V, row0: r0, total: n, invT });
        }
        return stats;
      });
      return (await out.toArray()).buffer as ArrayBuffer;
    });
    const n = packed.batch * (packed.seq - 1);
    const lps = unpack(packed, new Float32Array(bytes, 0, n));
    const ranks = new Uint32Array(bytes, 4 * n, n);
    group.forEach((k, g) => {
      const start = g * (packed.seq - 1) + packed.padLeft[g];
      results[k] = { logprobs: lps[g], ranks: ranks.slice(start, (g + 1) * (packed.seq - 1)) };
    });
  }
  return results;
}
