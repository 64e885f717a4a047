import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AdamW } from '../src/optim/adamw.ts';
import { clipGradNorm } from '../src/optim/clip.ts';
import { randn, mulberry32 } from '../src/util/random.ts';
import { backward, requireGrad, zeroGrad } from '../src/tensor/autograd.ts';
import { add, mean, square, sub } from '../src/tensor/ops/index.ts';
import { embedding } from '../src/tensor/ops/embedding.ts';
import { linear } from '../src/tensor/ops/matmul.ts';
import { rmsNorm } from '../src/tensor/ops/rmsnorm.ts';
import { swiglu } from '../src/tensor/ops/swiglu.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, type Tensor } from '../src/tensor/tensor.ts';
import { gpu } from './support/gpu.ts';

const VOCAB = 13;
const HIDDEN = 24;
const INTER = 40;
const TOKENS = 11;

interface Layer {
  norm: Tensor;
  gate: Tensor;
  up: Tensor;
  down: Tensor;
}

function param(shape: number[], seed: number, std: number): Tensor {
  return requireGrad(tensor(randn(shape.reduce((a, b) => a * b, 1), seed, std), shape));
}

// Two pre-norm SwiGLU MLP blocks with residuals over a token embedding, regressed onto
// a fixed random vector per token id.
function forward(emb: Tensor, layers: Layer[], ids: Int32Array, target: Tensor): Tensor {
  let h = embedding(emb, ids);
  for (const l of layers) {
    const x = rmsNorm(h, l.norm, 1e-6);
    h = add(h, linear(swiglu(linear(x, l.gate), linear(x, l.up)), l.down));
  }
  return mean(square(sub(h, target)));
}

describe('GPU memory over training steps', () => {
  test('50 forward/backward/AdamW steps hold the buffer pool flat', async () => {
    const rt = await gpu();
    const emb = param([VOCAB, HIDDEN], 1, 1);
    const layers: Layer[] = [0, 1].map((i) => ({
      norm: requireGrad(tensor(new Float32Array(HIDDEN).fill(1), [HIDDEN])),
      gate: param([INTER, HIDDEN], 10 + i, 0.2),
      up: param([INTER, HIDDEN], 20 + i, 0.2),
      down: param([HIDDEN, INTER], 30 + i, 0.2),
    }));
    const params = [emb, ...layers.flatMap((l) => [l.norm, l.gate, l.up, l.down])];
    const opt = new AdamW(params, { lr: 1e-2 });
    const table = randn(VOCAB * HIDDEN, 99);
    const pick = mulberry32(5);

    const losses: number[] = [];
    const snapshots = new Map<number, string>();
    for (let step = 1; step <= 50; step++) {
      const ids = Int32Array.from({ length: TOKENS }, () => Math.floor(pick() * VOCAB));
      const want = new Float32Array(TOKENS * HIDDEN);
      ids.forEach((id, n) => want.set(table.subarray(id * HIDDEN, (id + 1) * HIDDEN), n * HIDDEN));
      const loss = await scopeAsync(async () => {
        const l = forward(emb, layers, ids, tensor(want, [TOKENS, HIDDEN]));
        backward(l);
        const clip = await clipGradNorm(params, 1);
        assert.ok(clip.finite, `step ${step}: gradient norm ${clip.norm}`);
        opt.step(undefined, clip.scale);
        zeroGrad(params);
        return await l.item();
      });
      losses.push(loss);
      if (step === 5 || step === 50) {
        await rt.sync();
        const { inUse, allocated, liveBuffers } = rt.pool.stats;
        snapshots.set(step, JSON.stringify({ inUse, allocated, liveBuffers }));
      }
    }
    assert.equal(snapshots.get(50), snapshots.get(5), 'pool stats after step 50 vs step 5');
    assert.ok(losses[49] < 0.5 * losses[0], `the model trains: loss ${losses[0]} -> ${losses[49]}`);
    for (const p of params) p.dispose();
    opt.dispose();
  });
});
