// The decoding loop LocalEngine ran before its steps stayed on the GPU between
// readbacks, kept as the reference its tokens must equal bit for bit: one left-padded
// prefill, then one step at a time for every row, each step's logits sampled by the
// single-step kernel (sampleNext) with the uniform drawn on the CPU (uniformAt(seed, t)),
// read back, and the stop checks made on the host; finished rows keep stepping greedily
// (their tokens dropped) and the batch never shrinks. No stop strings, no top lists.

import type { CausalLM } from '../../src/models/causal_lm.ts';
import { lastLogits } from '../../src/scoring/generate.ts';
import type { SamplingParams } from '../../src/engines/engine.ts';
import { noGrad } from '../../src/tensor/autograd.ts';
import { sampleNext, type RowSampling } from '../../src/tensor/ops/sampling.ts';
import { scopeAsync } from '../../src/tensor/scope.ts';
import { uniformAt } from '../../src/util/random.ts';

export interface StepDecoded {
  tokenIds: number[];
  logprobs: number[];
}

/** Each request's tokens and log-probs, all requests in one batch. */
export async function stepDecode(model: CausalLM, requests: readonly { promptIds: readonly number[]; params: SamplingParams & { seed: number } }[]): Promise<StepDecoded[]> {
  const B = requests.length;
  const P = Math.max(...requests.map((r) => r.promptIds.length));
  const steps = Math.max(...requests.map((r) => r.params.maxTokens));
  const padLeft = Int32Array.from(requests, (r) => P - r.promptIds.length);
  const prompt = new Int32Array(B * P);
  requests.forEach((r, b) => prompt.set(r.promptIds, b * P + padLeft[b]));
  const stops = requests.map((r) => new Set([...(r.params.stopTokenIds ?? []), ...(r.params.ignoreEos ? [] : model.config.eosTokenIds)]));
  const out: StepDecoded[] = requests.map(() => ({ tokenIds: [], logprobs: [] }));
  const done = requests.map((r) => r.params.maxTokens === 0);
  const cache = model.newCache(B, P + steps - 1, padLeft);
  try {
    let ids = prompt;
    for (let t = 0; t < steps && done.some((d) => !d); t++) {
      const rows: RowSampling[] = requests.map((r, b) => done[b]
        ? { temperature: 0, topP: 1, topK: 0, u: 0 }
        : { temperature: r.params.temperature, topP: r.params.topP, topK: r.params.topK > 0 ? r.params.topK : 0, u: uniformAt(r.params.seed, t) });
      const input = ids;
      const sampled = await scopeAsync(() => sampleNext(noGrad(() => lastLogits(model, model.hiddenCached({ ids: input, batch: B, seq: t === 0 ? P : 1 }, cache))), rows));
      ids = Int32Array.from(sampled.ids);
      requests.forEach((r, b) => {
        if (done[b]) return;
        out[b].tokenIds.push(sampled.ids[b]);
        out[b].logprobs.push(sampled.logprobs[b]);
        done[b] = stops[b].has(sampled.ids[b]) || out[b].tokenIds.length >= r.params.maxTokens;
      });
    }
  } finally {
    cache.dispose();
  }
  return out;
}
