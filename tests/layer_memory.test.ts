// What a forward keeps (models/layer_step.ts): without gradients one layer's
// intermediates at a time, whatever the depth; with checkpointed layers the backward
// recomputes each layer and gives the same gradients as the plain tape.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadCausalLM, randomModel } from '../src/models/load.ts';
import { attachLora, loraParameters } from '../src/lora/lora.ts';
import { configFromPreset } from '../src/hf_model/presets.ts';
import type { CausalLM } from '../src/models/causal_lm.ts';
import { packLeft, packedLogprobs } from '../src/scoring/score.ts';
import { backward, noGrad, requireGrad, zeroGrad } from '../src/tensor/autograd.ts';
import { mean, mul, neg, sum } from '../src/tensor/ops/index.ts';
import { layerStep } from '../src/models/layer_step.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, type Tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}/`, import.meta.url).pathname;

const seqs = [[3, 9, 4, 7, 1, 8, 2, 6, 5], [11, 2, 9, 4, 6, 3]];

/** A small Qwen2.5-shaped config with `layers` layers. */
const tiny = (layers: number) => configFromPreset('qwen2.5-0.5b', {
  num_hidden_layers: layers, vocab_size: 256, hidden_size: 64, intermediate_size: 192, num_attention_heads: 4, num_key_value_heads: 2,
});

/** The gradients of the mean response log-prob of `seqs` with respect to `params`, and the log-probs. */
async function gradients(model: CausalLM, params: readonly Tensor[]): Promise<{ logprobs: Float32Array; grads: Float32Array[] }> {
  return scopeAsync(async () => {
    zeroGrad(params);
    const { logprobs } = packedLogprobs(model, packLeft(seqs));
    backward(neg(mean(logprobs)));
    const grads = await Promise.all(params.map((p) => read(p.grad!)));
    const lp = await read(logprobs);
    zeroGrad(params);
    return { logprobs: lp, grads };
  });
}

describe('layer memory', () => {
  for (const name of ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny']) {
    test(`${name}: checkpointed layers give the plain tape's log-probs and gradients`, async () => {
      await gpu();
      const model = loadCausalLM(fixture(name));
      const params = model.parameters();
      for (const p of params) requireGrad(p);
      model.checkpointLayers = false;
      const plain = await gradients(model, params);
      model.checkpointLayers = true;
      const ckpt = await gradients(model, params);
      assertClose(ckpt.logprobs, plain.logprobs, { atol: 1e-6, rtol: 0, label: 'log-probs' });
      plain.grads.forEach((g, i) => assertClose(ckpt.grads[i], g, { atol: 1e-5, rtol: 1e-5, label: `grad ${i}` }));
      for (const p of params) p.dispose();
    });
  }

  test('LoRA factors get the same gradients through checkpointed layers (frozen base, frozen embedding)', async () => {
    await gpu();
    const model = loadCausalLM(fixture('qwen3-tiny'));
    attachLora(model, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj', 'down_proj'], baseModel: null }, 1);
    // B starts at zero; move it so the A factors get gradients too.
    for (const b of [...model.lora.values()].map((l) => l.b)) b.storage.rt.upload(b.buffer, 0, new Float32Array(b.size).fill(0.01));
    const params = loraParameters(model);
    for (const p of params) requireGrad(p);
    model.checkpointLayers = false;
    const plain = await gradients(model, params);
    model.checkpointLayers = true;
    const ckpt = await gradients(model, params);
    plain.grads.forEach((g, i) => assertClose(ckpt.grads[i], g, { atol: 1e-6, rtol: 1e-5, label: `lora grad ${i}` }));
    assert.ok(plain.grads.some((g) => g.some((v) => v !== 0)));
    for (const p of [...model.parameters(), ...params]) p.dispose();
  });

  test('a checkpointed layer\'s first forward takes the kernels its recompute takes (TRAINING_FORWARD); a forward without a tape takes the policy\'s', async () => {
    const rt = await gpu();
    const seen: boolean[] = [];
    const layer = (x: Tensor) => {
      seen.push(rt.policy.attention.trainingForward);
      return mul(x, x);
    };
    await scopeAsync(async () => {
      const x = requireGrad(tensor(Float32Array.of(1, 2, 3, 4), [4]));
      backward(sum(layerStep(x, layer, () => [], true)));
      assert.deepEqual(seen, [true, false], 'the first forward as a training forward; the recompute taped, which decides alone');
      assert.deepEqual(await read(x.grad!), Float32Array.of(2, 4, 6, 8));
      seen.length = 0;
      noGrad(() => layerStep(tensor(Float32Array.of(1, 2), [2]), layer, () => [], true));
      assert.deepEqual(seen, [false], 'no tape: the policy as it is');
    });
    assert.equal(rt.policy.attention.trainingForward, false);
  });

  for (const name of ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny']) {
    test(`${name}: a forward without gradients, each layer's intermediates freed as it ends, gives the tape's log-probs bit for bit`, async () => {
      const rt = await gpu();
      const model = loadCausalLM(fixture(name));
      for (const p of model.parameters()) requireGrad(p);
      const taped = await scopeAsync(async () => read(packedLogprobs(model, packLeft(seqs)).logprobs));
      await rt.sync();
      const live = rt.pool.stats.inUse;
      const freed = await scopeAsync(async () => read(noGrad(() => packedLogprobs(model, packLeft(seqs)).logprobs)));
      assert.deepEqual(freed, taped);
      assert.equal(rt.pool.stats.inUse, live, 'nothing of the forward outlives its scope');
      for (const p of model.parameters()) p.dispose();
    });
  }

  test('a forward without gradients holds one layer\'s intermediates, not one per layer', async () => {
    const rt = await gpu();
    const peakOf = async (layers: number) => {
      const model = randomModel(tiny(layers), 2);
      const weights = rt.pool.stats.inUse;
      await rt.sync();
      rt.pool.resetPeaks();
      await scopeAsync(async () => noGrad(() => packedLogprobs(model, packLeft([Array.from({ length: 128 }, (_, i) => (i * 7) % 256)]))).logprobs.toArray());
      const peak = rt.pool.stats.peakInUse - weights;
      for (const p of model.parameters()) p.dispose();
      return peak;
    };
    const two = await peakOf(2);
    const eight = await peakOf(8);
    // Plain tapes kept every layer: the peak grew about fourfold from 2 to 8 layers.
    assert.ok(eight < two * 1.25, `peak over the weights: 2 layers ${two} B, 8 layers ${eight} B`);
  });

  test('checkpointed training holds less than the plain tape', async () => {
    const rt = await gpu();
    const model = randomModel(tiny(6), 3);
    const params = model.parameters();
    for (const p of params) requireGrad(p);
    const peak = async (on: boolean) => {
      model.checkpointLayers = on;
      await rt.sync();
      const base = rt.pool.stats.inUse;
      rt.pool.resetPeaks();
      await scopeAsync(async () => {
        const { logprobs } = packedLogprobs(model, packLeft([Array.from({ length: 96 }, (_, i) => (i * 5) % 256)]));
        backward(neg(mean(logprobs)));
        await rt.sync();
      });
      zeroGrad(params);
      return rt.pool.stats.peakInUse - base;
    };
    const plain = await peak(false);
    const ckpt = await peak(true);
    assert.ok(ckpt < plain * 0.6, `peak: plain ${plain} B, checkpointed ${ckpt} B`);
    for (const p of params) p.dispose();
  });

  test('a tied embedding\'s gradient goes into .grad as each use gives it: the LM head\'s is not held through the backward', async () => {
    const rt = await gpu();
    // A vocabulary whose [vocab, hidden] weight outweighs the rest of the model and the activations.
    const model = randomModel({ ...tiny(1), vocabSize: 16384 }, 4);
    assert.ok(model.config.tieEmbeddings, 'the Qwen2.5 preset ties the LM head to the embedding');
    const params = model.parameters();
    for (const p of params) requireGrad(p);
    const paramBytes = params.reduce((n, p) => n + 4 * p.size, 0);
    const tied = 4 * 16384 * model.config.hidden;
    await rt.sync();
    const extra = await scopeAsync(async () => {
      const { logprobs } = packedLogprobs(model, packLeft([Array.from({ length: 24 }, (_, i) => (i * 37) % 16384)]));
      const loss = neg(mean(logprobs));
      await rt.sync();
      const before = rt.pool.stats.inUse;
      rt.pool.resetPeaks();
      backward(loss);
      await rt.sync();
      return rt.pool.stats.peakInUse - before;
    });
    zeroGrad(params);
    // Held until the embedding's turn, the head's gradient, the embedding's and their sum
    // made the backward's peak the gradients and two more tied weights; now one more at most.
    assert.ok(extra < paramBytes + 1.5 * tied, `backward peak over the forward: ${extra} B; gradients ${paramBytes} B, the tied weight ${tied} B`);
    for (const p of params) p.dispose();
  });
});
