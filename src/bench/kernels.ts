// Attention timings at the training shapes of Qwen2.5-0.5B (batch 8 x 512 tokens, 14
// query heads, 2 kv heads, head dim 64) and of the bundled model's GRPO micro-batches
// (each path, and the tensor-core forward where the device has it), and the loss
// kernel's at Qwen2.5-0.5B's (vocab 151,936).

import type { Runtime } from '../gpu/runtime.ts';
import { randn } from '../util/random.ts';
import { backward, noGrad, requireGrad } from '../tensor/autograd.ts';
import type { AttentionPath } from '../gpu/kernel_policy.ts';
import { blockedFits } from '../kernels/attention.ts';
import { tensorAttentionMissing } from '../kernels/attention_tensor.ts';
import { attention, mean, mul, sum, tokenLogprobs } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';
import { tensor, type Tensor } from '../tensor/tensor.ts';
import { randomIds } from './train_step.ts';
import { timeGpu } from './timing.ts';

function tiled(n: number, seed: number, scale: number): Float32Array {
  const block = randn(1 << 16, seed, scale);
  const out = new Float32Array(n);
  for (let at = 0; at < n; at += block.length) out.set(block.subarray(0, Math.min(block.length, n - at)), at);
  return out;
}

interface AttentionShape { name: string; B: number; T: number; Hq: number; Hkv: number; D: number }

/** Qwen2.5-0.5B's training step, and one GRPO micro-batch of the bundled model. */
const ATTENTION_SHAPES: AttentionShape[] = [
  { name: 'qwen05b', B: 8, T: 512, Hq: 14, Hkv: 2, D: 64 },
  { name: 'household', B: 16, T: 2048, Hq: 4, Hkv: 2, D: 64 },
];

/** The attention paths worth timing here: the software GPU's, or tiled and (where it fits) blocked. */
function attentionPaths(rt: Runtime, D: number): AttentionPath[] {
  if (rt.caps.compatibility) return ['uniform'];
  return blockedFits(rt.gpu.limits, D) ? ['tiled', 'blocked'] : ['tiled'];
}

/**
 * Forward and forward+backward of causal attention at each shape on each path, and how
 * far each path's output and gradients are from the first path's (the GPU-side check
 * of a new path at full size).
 */
export async function benchAttention(rt: Runtime, shapes: AttentionShape[] = ATTENTION_SHAPES, paths?: AttentionPath[]): Promise<object[]> {
  const rows: object[] = [];
  const policy = rt.policy.attention.path;
  try {
    for (const { name, B, T, Hq, Hkv, D } of shapes) {
      const q = requireGrad(tensor(tiled(B * Hq * T * D, 1, 1), [B, Hq, T, D]));
      const k = requireGrad(tensor(tiled(B * Hkv * T * D, 2, 1), [B, Hkv, T, D]));
      const v = requireGrad(tensor(tiled(B * Hkv * T * D, 3, 1), [B, Hkv, T, D]));
      const flops = 4 * B * Hq * T * T * D / 2;
      let first: Float32Array[] | null = null;
      for (const path of paths ?? attentionPaths(rt, D)) {
        rt.policy.attention.path = path;
        const fwd = await timeGpu(rt, () => scopeAsync(async () => void attention(q, k, v)));
        const both = await timeGpu(rt, () => scopeAsync(async () => {
          backward(sum(attention(q, k, v)));
          for (const t of [q, k, v]) { t.grad?.dispose(); t.grad = null; }
        }));
        // Weighted sum so every output element gets its own gradient.
        const values = await scopeAsync(async () => {
          const o = attention(q, k, v);
          backward(sum(mul(o, o)));
          const out = await Promise.all([o, q.grad!, k.grad!, v.grad!].map(async (t) => Float32Array.from(await t.toArray())));
          for (const t of [q, k, v]) { t.grad?.dispose(); t.grad = null; }
          return out;
        });
        const diff = first ? values.map((x, i) => maxAbsDiff(x, first![i])) : null;
        first ??= values;
        rows.push({
          kind: 'attention', shape: name, B, T, Hq, Hkv, D, path,
          forward_ms: +fwd.toFixed(3), forward_tflops: +(flops / fwd / 1e9).toFixed(2),
          forward_backward_ms: +both.toFixed(3), forward_backward_tflops: +((3.5 * flops) / both / 1e9).toFixed(2),
          ...(diff && { max_abs_diff_vs_first: { o: diff[0], dq: diff[1], dk: diff[2], dv: diff[3] } }),
        });
      }
      if (tensorAttentionMissing(rt, D) === null) rows.push(await benchTensorForward(rt, name, q, k, v, flops, first![0]));
      for (const t of [q, k, v]) t.dispose();
    }
  } finally {
    rt.policy.attention.path = policy;
  }
  return rows;
}

/** The tensor-core forward (no gradient follows), against the first path's output. */
async function benchTensorForward(rt: Runtime, shape: string, q: Tensor, k: Tensor, v: Tensor, flops: number, first: Float32Array): Promise<object> {
  const [B, Hq, T, D] = q.shape;
  const before = rt.policy.attention.tensorForward;
  rt.policy.attention.tensorForward = true;
  try {
    const fwd = await timeGpu(rt, () => scopeAsync(async () => void noGrad(() => attention(q, k, v))));
    const o = await scopeAsync(async () => Float32Array.from(await noGrad(() => attention(q, k, v)).toArray()));
    return {
      kind: 'attention', shape, B, T, Hq, Hkv: k.shape[1], D, path: 'tensor (forward, no gradient)',
      forward_ms: +fwd.toFixed(3), forward_tflops: +(flops / fwd / 1e9).toFixed(2),
      max_abs_diff_vs_first: { o: maxAbsDiff(o, first) },
    };
  } finally {
    rt.policy.attention.tensorForward = before;
  }
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
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
