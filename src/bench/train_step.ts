// A full training step on the shapes of ../shared/bench/torch_reference.py: forward,
// next-token loss through the chunked log-prob kernel, backward and AdamW, batch 8 x
// 512, random weights from the config. Reports ms/step, tokens/s and peak GPU memory
// (bytes the buffer pool held) to set beside PyTorch's figures.

import type { Runtime } from '../gpu/runtime.ts';
import { randomModel } from '../models/load.ts';
import { configFromPreset } from '../hf_model/presets.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { tensorMatmulAvailable } from '../kernels/matmul/tensor.ts';
import { AdamW } from '../optim/adamw.ts';
import { mulberry32 } from '../util/random.ts';
import { backward, zeroGrad } from '../tensor/autograd.ts';
import { mean, neg, reshape, slice, tokenLogprobs } from '../tensor/ops/index.ts';
import { scopeAsync } from '../tensor/scope.ts';

/** The model shapes torch_reference.py names, and the bundled household model's (what the embedded default trains). */
export const BENCH_MODELS: Record<string, Record<string, unknown>> = {
  qwen05b: {},
  qwen15b: { hidden_size: 1536, intermediate_size: 8960, num_hidden_layers: 28, max_window_layers: 28, num_attention_heads: 12, num_key_value_heads: 2 },
  small: { vocab_size: 8192, hidden_size: 384, intermediate_size: 1024, num_hidden_layers: 6, num_attention_heads: 6, num_key_value_heads: 2 },
  household: { vocab_size: 709, hidden_size: 256, intermediate_size: 768, num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2 },
};

/** The config of a bench preset, with `overrides` (HF keys) on top. */
export function benchConfig(preset: string, overrides: Record<string, unknown> = {}): ModelConfig {
  const shapes = BENCH_MODELS[preset];
  if (!shapes) throw new Error(`unknown bench model "${preset}" (have ${Object.keys(BENCH_MODELS).join(', ')})`);
  return configFromPreset('qwen2.5-0.5b', { ...shapes, ...overrides });
}

export function benchModel(preset: string): CausalLM {
  return randomModel(benchConfig(preset), 0, { fast: true });
}

export function randomIds(n: number, vocab: number, seed: number): Int32Array {
  const r = mulberry32(seed);
  return Int32Array.from({ length: n }, () => Math.floor(r() * vocab));
}

/** One full training step of the bench model, ready to run repeatedly. */
export function trainStepRunner(rt: Runtime, preset: string, B = 8, T = 512): { step: () => Promise<void>; nparam: number; dispose: () => void } {
  const model = benchModel(preset);
  const params = model.parameters();
  const opt = new AdamW(params, { lr: 1e-5, weightDecay: 0.01 });
  const V = model.config.vocabSize;
  const ids = randomIds(B * T, V, 1);
  const targets = new Int32Array(B * (T - 1));
  for (let b = 0; b < B; b++) for (let t = 0; t < T - 1; t++) targets[b * (T - 1) + t] = ids[b * T + t + 1];
  const step = () => scopeAsync(async () => {
    const hidden = model.hidden({ ids, batch: B, seq: T });
    const used = reshape(slice(hidden, 1, 0, T - 1), [B * (T - 1), model.config.hidden]);
    const loss = neg(mean(tokenLogprobs(used, model.lmHead(), targets).logprobs));
    backward(loss);
    opt.step();
    zeroGrad(params);
    await rt.sync();
  });
  const dispose = () => {
    opt.dispose();
    for (const p of params) p.dispose();
    rt.pool.trim();
  };
  return { step, nparam: params.reduce((s, p) => s + p.size, 0), dispose };
}

export async function benchTrainStep(rt: Runtime, preset: string, opts: { batch?: number; seq?: number; iters?: number } = {}): Promise<object[]> {
  const B = opts.batch ?? 8;
  const T = opts.seq ?? 512;
  const { step, nparam, dispose } = trainStepRunner(rt, preset, B, T);
  await step();
  rt.pool.resetPeaks();
  const times: number[] = [];
  const iters = opts.iters ?? 3;
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await step();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const ms = times[Math.floor(times.length / 2)];
  const row = {
    kind: 'train_step', preset, batch: B, seq: T, params_m: +(nparam / 1e6).toFixed(1), ms: +ms.toFixed(1),
    tokens_per_s: Math.round((B * T) / (ms / 1000)), tflops_6nd: +((6 * nparam * B * T) / (ms / 1000) / 1e12).toFixed(2),
    peak_gib: +(rt.pool.stats.peakAllocated / 2 ** 30).toFixed(2), peak_in_use_gib: +(rt.pool.stats.peakInUse / 2 ** 30).toFixed(2),
    dispatches: rt.dispatchCount,
    tensor_cores: !rt.policy.tensorCores.enabled || !tensorMatmulAvailable(rt) ? 'none' : rt.policy.tensorCores.gradients ? 'forward and gradients' : 'forward',
  };
  dispose();
  return [row];
}
