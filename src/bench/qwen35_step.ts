// Forward + backward of the next-token loss through Qwen3.5's hybrid decoder (Gated
// DeltaNet + gated full attention), random weights, no optimizer step: the figure
// dev/torch_qwen35.py measures for transformers' Qwen3_5ForCausalLM in the same run.
// Both scripts carry the same shapes; each prints its config so a run shows they agree.

import type { Runtime } from '../gpu/runtime.ts';
import { parseConfig, type ModelConfig } from '../hf_model/config.ts';
import { expectedShapes } from '../hf_model/checkpoint.ts';
import type { ParamMap } from '../models/causal_lm.ts';
import { Qwen35Model } from '../models/qwen35.ts';
import { randn, uniform } from '../util/random.ts';
import { backward, requireGrad, zeroGrad } from '../tensor/autograd.ts';
import { mean, neg, reshape, slice, tokenLogprobs } from '../tensor/ops/index.ts';
import { keep, scopeAsync } from '../tensor/scope.ts';
import { tensor } from '../tensor/tensor.ts';
import { randomIds } from './train_step.ts';

interface BenchShape {
  /** config.json fields (model_type qwen3_5_text), as dev/torch_qwen35.py passes them to Qwen3_5TextConfig. */
  config: Record<string, unknown>;
  source: string;
  batch: number;
  seq: number;
}

/** The shapes dev/torch_qwen35.py names; keep the two in step. */
export const QWEN35_BENCH_SHAPES: Record<string, BenchShape> = {
  '2b': {
    config: {
      vocab_size: 248320, hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 24,
      num_attention_heads: 8, num_key_value_heads: 2, head_dim: 256,
      linear_num_key_heads: 16, linear_num_value_heads: 16, linear_key_head_dim: 128, linear_value_head_dim: 128,
      linear_conv_kernel_dim: 4, full_attention_interval: 4, attn_output_gate: true, attention_bias: false,
      rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 },
      rms_norm_eps: 1e-6, tie_word_embeddings: true, max_position_embeddings: 262144,
    },
    source: "text_config of Qwen/Qwen3.5-2B's config.json as quoted by public code (not read from the Hub itself); "
      + 'text-only RoPE (M-RoPE reduces to it for text positions), no MTP layer',
    batch: 4,
    seq: 1024,
  },
  small: {
    config: {
      vocab_size: 512, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,
      num_attention_heads: 2, num_key_value_heads: 1, head_dim: 32,
      linear_num_key_heads: 2, linear_num_value_heads: 4, linear_key_head_dim: 16, linear_value_head_dim: 16,
      linear_conv_kernel_dim: 4, full_attention_interval: 2, attn_output_gate: true, attention_bias: false,
      rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 },
      rms_norm_eps: 1e-6, tie_word_embeddings: true, max_position_embeddings: 4096,
    },
    source: 'tiny smoke-test shape: one linear-attention and one full-attention layer',
    batch: 2,
    seq: 32,
  },
};

export function qwen35BenchConfig(shape: string): ModelConfig {
  const s = QWEN35_BENCH_SHAPES[shape];
  if (!s) throw new Error(`unknown qwen35 bench shape "${shape}" (have ${Object.keys(QWEN35_BENCH_SHAPES).join(', ')})`);
  return parseConfig({ architectures: ['Qwen3_5ForCausalLM'], model_type: 'qwen3_5_text', ...s.config }, `qwen35 bench shape ${shape}`);
}

/**
 * Random weights as transformers initialises Qwen3.5: normal(0, 0.02) matrices, zero
 * (that is, unit) zero-centred norms, a unit gated norm, dt_bias 1, A = U(0.01, 16).
 * Matrices tile one block of normal samples (from a shifting start, so no two share
 * their rows): the same scale without drawing two billion samples on the CPU.
 */
export function randomQwen35(config: ModelConfig, seed = 0): Qwen35Model {
  const block = randn(1 << 20, seed, 0.02);
  const params: ParamMap = new Map();
  let k = 0;
  for (const [name, shape] of expectedShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    let data: Float32Array;
    if (name.endsWith('.A_log')) data = uniform(n, seed * 1000003 + k, 0.01, 16).map(Math.log);
    else if (name.endsWith('.dt_bias') || name.endsWith('.linear_attn.norm.weight')) data = new Float32Array(n).fill(1);
    else if (name.endsWith('norm.weight')) data = new Float32Array(n);
    else {
      data = new Float32Array(n);
      const start = (k * 7919) % block.length;
      const first = Math.min(n, block.length - start);
      data.set(block.subarray(start, start + first));
      for (let at = first; at < n; at += block.length) data.set(block.subarray(0, Math.min(block.length, n - at)), at);
    }
    k++;
    const t = keep(tensor(data, shape));
    t.name = name;
    params.set(name, requireGrad(t));
  }
  return new Qwen35Model(config, params);
}

export interface Qwen35BenchOptions {
  batch?: number;
  seq?: number;
  warmup?: number;
  iters?: number;
}

export async function benchQwen35(rt: Runtime, shape = '2b', opts: Qwen35BenchOptions = {}): Promise<object[]> {
  const config = qwen35BenchConfig(shape);
  const preset = QWEN35_BENCH_SHAPES[shape];
  const B = opts.batch ?? preset.batch;
  const T = opts.seq ?? preset.seq;
  const warmup = opts.warmup ?? 1;
  const iters = opts.iters ?? 3;
  if (!(B >= 1 && T >= 2 && warmup >= 1 && iters >= 1)) throw new Error(`qwen35 bench: need batch >= 1, seq >= 2, warmup >= 1, iters >= 1 (got ${B}, ${T}, ${warmup}, ${iters})`);
  const model = randomQwen35(config);
  const params = model.parameters();
  const ids = randomIds(B * T, config.vocabSize, 1);
  const targets = new Int32Array(B * (T - 1));
  for (let b = 0; b < B; b++) for (let t = 0; t < T - 1; t++) targets[b * (T - 1) + t] = ids[b * T + t + 1];
  // The loss read back in warm-up shows the model computes something sane (~ln V at init).
  const step = (readLoss: boolean) => scopeAsync(async () => {
    const hidden = model.hidden({ ids, batch: B, seq: T });
    const used = reshape(slice(hidden, 1, 0, T - 1), [B * (T - 1), config.hidden]);
    const loss = neg(mean(tokenLogprobs(used, model.lmHead(), targets).logprobs));
    backward(loss);
    const value = readLoss ? (await loss.toArray())[0] : NaN;
    await rt.sync();
    zeroGrad(params);
    return value;
  });
  let firstLoss = NaN;
  for (let i = 0; i < warmup; i++) {
    const l = await step(i === 0);
    if (i === 0) firstLoss = l;
  }
  rt.pool.resetPeaks();
  const dispatches0 = rt.dispatchCount;
  const times: number[] = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await step(false);
    times.push(performance.now() - t0);
  }
  const dispatches = (rt.dispatchCount - dispatches0) / iters;
  times.sort((a, b) => a - b);
  const ms = times[Math.floor(times.length / 2)];
  const nparam = params.reduce((s, p) => s + p.size, 0);
  const row = {
    bench: 'qwen35_fwd_bwd', impl: 'webgpu', shape, shape_source: preset.source, config: preset.config,
    layer_types: config.layerTypes.map((l) => (l === 'linear_attention' ? 'L' : 'F')).join(''),
    batch: B, seq: T, tokens: B * T, params: nparam, warmup, iters,
    loss_first: +firstLoss.toFixed(4),
    ms_per_step: +ms.toFixed(1), ms_min: +times[0].toFixed(1),
    tokens_per_s: Math.round((B * T) / (ms / 1000)),
    tflops_6nd: +((6 * nparam * B * T) / (ms / 1000) / 1e12).toFixed(2),
    // peak_bytes: buffers in use at the high-water mark (torch.cuda.max_memory_allocated's
    // counterpart); peak_held_bytes: what the pool held from the device, cached buffers
    // included (max_memory_reserved's counterpart).
    peak_bytes: rt.pool.stats.peakInUse, peak_held_bytes: rt.pool.stats.peakAllocated,
    dispatches_per_step: Math.round(dispatches),
    loss: 'mean next-token NLL over B x (T-1) through the chunked tokenLogprobs kernel (no [tokens, vocab] logits)',
  };
  for (const p of params) p.dispose();
  rt.pool.trim();
  return [row];
}
