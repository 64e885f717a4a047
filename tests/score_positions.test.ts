// packedLogprobs restricted to some positions (what the RL update scores: response
// tokens only) gives the full computation's values there, and the same gradients; the
// trainer's per-sample response log-probs built on it match scoring whole sequences.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randomModel } from '../src/models/load.ts';
import { configFromPreset } from '../src/hf_model/presets.ts';
import { packedLogprobs, packLeft, scoreSequences } from '../src/scoring/score.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { turnSequences } from '../src/rollout/turn_sequences.ts';
import { responseLogprobs, splitMicroBatches } from '../src/trainer/update.ts';
import { backward, zeroGrad } from '../src/tensor/autograd.ts';
import { mul, sum } from '../src/tensor/ops/index.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

describe('scoring chosen positions', () => {
  test('values and gradients match the full computation at those positions', async () => {
    await gpu();
    const cfg = configFromPreset('qwen2.5-0.5b', {
      vocab_size: 97, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, tie_word_embeddings: true,
    });
    const model = randomModel(cfg, 5, { trainable: true });
    const params = model.parameters();
    const packed = packLeft([[5, 9, 13, 2, 40, 41], [7, 8, 90], [1, 2, 3, 4]]);
    // Some positions of each row (flat over batch x (seq - 1)), not in order.
    const positions = Int32Array.of(3, 4, 9, 13, 14, 12);
    const weights = Float32Array.of(0.5, -1, 2, 0.25, 1, -0.75);
    const grads = async (lp: (w: Float32Array) => Promise<Float32Array>) => {
      zeroGrad(params);
      const values = await lp(weights);
      const out = await Promise.all(params.map((p) => read(p.grad!)));
      return { values, grads: out };
    };
    const full = await grads((w) => scopeAsync(async () => {
      const { logprobs, entropy } = packedLogprobs(model, packed, { withEntropy: true });
      const dense = new Float32Array(logprobs.size);
      positions.forEach((p, k) => (dense[p] = w[k]));
      backward(sum(mul(logprobs, tensor(dense))));
      const [lp, ent] = [await read(logprobs), await read(entropy!)];
      return Float32Array.from([...positions].flatMap((p) => [lp[p], ent[p]]));
    }));
    const chosen = await grads((w) => scopeAsync(async () => {
      const { logprobs, entropy } = packedLogprobs(model, packed, { withEntropy: true, positions });
      backward(sum(mul(logprobs, tensor(w))));
      const [lp, ent] = [await read(logprobs), await read(entropy!)];
      return Float32Array.from([...positions].flatMap((_, k) => [lp[k], ent[k]]));
    }));
    assertClose(chosen.values, full.values, { atol: 1e-5 });
    full.grads.forEach((g, i) => assertClose(chosen.grads[i], g, { atol: 1e-5, label: `gradient ${i}` }));
    assert.ok(full.grads.some((g) => g.some((x) => x !== 0)));
    for (const p of params) p.dispose();
  });
});

describe('response log-probs of step samples', () => {
  test('match scoring the whole sequences; a sample without response tokens gets an empty array', async () => {
    await gpu();
    const cfg = configFromPreset('qwen2.5-0.5b', {
      vocab_size: 97, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, tie_word_embeddings: true,
    });
    const model = randomModel(cfg, 9);
    const sample = (trajectoryId: string, promptIds: number[], responseIds: number[]) => ({ trajectoryId, turn: 0, promptIds, responseIds }) as StepSample;
    const samples = [sample('a', [3, 4, 5], [6, 7]), sample('b', [8, 9], []), sample('c', [10], [11, 12, 13])];
    // A budget that splits them into several micro-batches.
    const lp = await responseLogprobs(model, samples, splitMicroBatches(turnSequences(samples, { merge: true }), [0, 1, 2], 5));
    const whole = await scoreSequences(model, [[3, 4, 5, 6, 7], [10, 11, 12, 13]]);
    assert.deepEqual(lp.map((a) => a.length), [2, 0, 3]);
    assertClose(lp[0], whole[0].subarray(2), { atol: 1e-5 });
    assertClose(lp[2], whole[1], { atol: 1e-5 });
    for (const p of model.parameters()) p.dispose();
  });
});
