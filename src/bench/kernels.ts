// Attention and loss-kernel timings at the training shapes of Qwen2.5-0.5B
// (batch 8 x 512 tokens, 14 query heads, 2 kv heads, head dim 64, vocab 151,936).

import type { Runtime } from '../gpu/runtime.ts';
import { randn } from '../reference/random.ts';
import { backward, requireGrad } from '../tensor/autograd.ts';
import { attention, mean, sum, tokenLogprobs } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';
import { tensor } from '../tensor/tensor.ts';
import { randomIds } from './train_step.ts';
import { timeGpu } from './timing.ts';

function tiled(n: number, seed: number, scale: number): Float32Array {
  const block = randn(1 << 16, seed, scale);
  const out = new Float32Array(n);
  for (let at = 0; at < n; at += block.length) out.set(block.subarray(0, Math.min(block.length, n - at)), at);
  return out;
}

export async function benchAttention(rt: Runtime, { B = 8, T = 512, Hq = 14, Hkv = 2, D = 64 } = {}): Promise<object[]> {
  const q = requireGrad(tensor(tiled(B * Hq * T * D, 1, 1), [B, Hq, T, D]));
  const k = requireGrad(tensor(tiled(B * Hkv * T * D, 2, 1), [B, Hkv, T, D]));
  const v = requireGrad(tensor(tiled(B * Hkv * T * D, 3, 1), [B, Hkv, T, D]));
  const fwd = await timeGpu(rt, () => scopeAsync(async () => void attention(q, k, v)));
  const both = await timeGpu(rt, () => scopeAsync(async () => {
    backward(sum(attention(q, k, v)));
    for (const t of [q, k, v]) { t.grad?.dispose(); t.grad = null; }
  }));
  const flops = 4 * B * Hq * T * T * D / 2;
  for (const t of [q, k, v]) t.dispose();
  return [
    { kind: 'attention', B, T, Hq, Hkv, D, pass: 'forward', ms: +fwd.toFixed(3), tflops: +(flops / fwd / 1e9).toFixed(2) },
    { kind: 'attention', B, T, Hq, Hkv, D, pass: 'forward+backward', ms: +both.toFixed(3), tflops: +((3.5 * flops) / both / 1e9).toFixed(2) },
  ];
}

export async function benchLoss(rt: Runtime, { N = 4096, H = 896, V = 151936 } = {}): Promise<object[]> {
  const hidden = requireGrad(tensor(tiled(N * H, 4, 1), [N, H]));
  const weight = requireGrad(tensor(tiled(V * H, 5, 0.02), [V, H]));
  const targets = randomIds(N, V, 6);
  const fwd = await timeGpu(rt, () => scopeAsync(async () => void tokenLogprobs(hidden, weight, targets, { withEntropy: true })), { iters: 3 });
  const both = await timeGpu(rt, () => scopeAsync(async () => {
    const r = tokenLogprobs(hidden, weight, targets, { withEntropy: true });
    backward(mean(r.logprobs));
    for (const t of [hidden, weight]) { t.grad?.dispose(); t.grad = null; }
  }), { iters: 3 });
  hidden.dispose();
  weight.dispose();
  const flops = 2 * N * H * V;
  return [
    { kind: 'logprob_loss', N, H, V, pass: 'forward', ms: +fwd.toFixed(2), tflops: +(flops / fwd / 1e9).toFixed(2) },
    { kind: 'logprob_loss', N, H, V, pass: 'forward+backward', ms: +both.toFixed(2), tflops: +((4 * flops) / both / 1e9).toFixed(2) },
  ];
}
