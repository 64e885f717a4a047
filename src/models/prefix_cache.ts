// Rows after shared prefixes through a model's cache, for a decoder whose layers carry
// state a taped pass cannot hand on (Qwen3.5's Gated DeltaNet: a stateful call records
// no gradient). The prefixes prefill one cache, left-padded; each row takes a copy of
// its prefix's row and runs its own tokens after it. Passes without gradients only.

import { isGradEnabled } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { CausalLM } from './causal_lm.ts';
import { checkPrefixBatch, type PrefixBatch, type PrefixedRows } from './token_batch.ts';

export function hiddenAfterCachedPrefixes(model: CausalLM, prefixes: PrefixBatch, rows: PrefixedRows): Tensor {
  if (isGradEnabled()) throw new Error(`hiddenAfterPrefixes: ${model.config.family}'s shared prefixes run through its cache, which records no gradient; score whole sequences in a training step`);
  checkPrefixBatch(prefixes, rows);
  const shared = model.newCache(prefixes.batch, prefixes.seq + rows.seq, prefixes.padLeft);
  model.hiddenCached({ ids: prefixes.ids, batch: prefixes.batch, seq: prefixes.seq }, shared).dispose();
  const own = shared.takeRows(Array.from(prefixes.of));
  shared.dispose();
  try {
    return model.hiddenCached({ ids: rows.ids, batch: rows.batch, seq: rows.seq }, own);
  } finally {
    own.dispose();
  }
}
