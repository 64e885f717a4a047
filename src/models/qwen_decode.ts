// The decode step of Qwen2 / Qwen3 with fused kernels. A step of one token per
// sequence is bound by its dispatches (on the H200 each costs ~16 us of GPU time
// plus host time, more than its arithmetic), and the op-by-op layer issues 17:
// rmsnorm, q/k/v projections, rope of q and k, two cache writes, attention, o_proj,
// residual add, rmsnorm, gate, up, swiglu, down, residual add. Here a layer is 6:
//
//   rmsnorm + q|k|v (skinny_concat_norm), q/k-norm + rope + cache append
//   (qkv_cache), attention, o_proj + residual, rmsnorm + gate|up + SwiGLU
//   (skinny_swiglu with its norm), down_proj + residual
//
// (7 on a device with only WebGPU's minimum of 8 storage bindings per stage, where the
// first norm keeps its own dispatch.) Folded, each workgroup re-sums its rows' squares
// itself: free for a few rows, but at 32 (four 8-row blocks per column group) it
// re-read the activations once per column group, and batch-32 decoding of the
// Qwen2.5-0.5B shapes fell from 4,423 to 4,053 tokens/s on the H200. So the norms
// fold only up to the runtime's policy.decode.foldNormMaxRows rows and run as their
// own dispatches above (8 a layer).
//
// The results equal the op-by-op layer's up to float rounding. The fused ops record
// no gradient and run on the skinny matmul kernels, so a step takes them only under
// noGrad, with a KV cache, one token per sequence, and when the launcher would take
// the skinny path for these products anyway (real GPUs, a few dozen rows); a block
// with a LoRA-adapted projection keeps the op-by-op form. Given f16 copies of the
// weights (the step's halfWeights, models/half_weights.ts), the fused layers read
// those: half the bytes of a step that reads every weight once.

import type { CausalLM } from './causal_lm.ts';
import type { KVCache } from './kv_cache.ts';
import type { HalfWeightMap, LayerStep } from './token_batch.ts';
import { shapeTakesTensorCores } from '../kernels/matmul/precision.ts';
import { autoTile } from '../kernels/matmul/select.ts';
import { skinnyConcatTakesNorm } from '../kernels/matmul/skinny.ts';
import { SKINNY_TILE } from '../kernels/matmul/tiles.ts';
import { isGradEnabled } from '../tensor/autograd.ts';
import { attention } from '../tensor/ops/attention.ts';
import { decodeOnTensorCores, linearConcat, linearResidual, linearSwiglu, ropeQkvCache, type Weight } from '../tensor/ops/decode.ts';
import { rmsNorm } from '../tensor/ops/rmsnorm.ts';
import { permute, reshape } from '../tensor/ops/shape_ops.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** Whether a step of `rows` rows (of x) folds its RMSNorm into the products by `w` that follow (rt.policy.decode); on tensor cores it never does. */
const foldsNorm = (x: Tensor, rows: number, w: Weight) =>
  rows <= x.storage.rt.policy.decode.foldNormMaxRows && !decodeOnTensorCores(x.storage.rt, rows, w.shape[0] * w.shape[1]);

/**
 * Whether a step of `seq` new tokens for `batch` sequences takes the fused layers; on
 * tensor cores only with the f16 copies (`half`), whose stacked q|k|v those read.
 */
export function fusesStep(model: CausalLM, batch: number, seq: number, cache: KVCache | null, half?: HalfWeightMap): boolean {
  return !!cache && seq === 1 && !isGradEnabled() && fusesRows(model, batch) && (!!half || !decodeOnTensorCores(model.lmHead().storage.rt, batch));
}

/**
 * Whether decode steps of `rows` sequences take the fused layers (fusesStep without
 * the step's own conditions): the policy allows them and the products fit the skinny
 * kernels, which the launcher would take on this device anyway unless forced, or on a
 * real GPU the layers are small (policy.decode.fusedAnyRowsMaxBytes), or the rows are
 * enough for tensor cores (policy.decode.tensorMinRows).
 */
export function fusesRows(model: CausalLM, rows: number): boolean {
  const rt = model.lmHead().storage.rt;
  const { fused } = rt.policy.decode;
  if (fused === 'never') return false;
  const cfg = model.config;
  // The K of each product: hidden (q|k|v, gate|up), q heads (o_proj), intermediate (down_proj).
  const ks = [cfg.hidden, cfg.heads * cfg.headDim, cfg.intermediate];
  if (ks.some((k) => k % 4 !== 0)) return false;
  if (fused === 'always' || decodeOnTensorCores(rt, rows)) return true;
  if (!rt.caps.compatibility && smallDecodeLayers(model)) return true;
  return ks.every((k) => autoTile(rt, { m: rows, n: 1, k, transB: true }) === SKINNY_TILE);
}

/**
 * Whether every projection weight of `model`'s layers holds at most
 * policy.decode.fusedAnyRowsMaxBytes: weights that stay in L2, which the fused layers
 * take at any row count.
 */
function smallDecodeLayers(model: CausalLM): boolean {
  const cfg = model.config;
  const bound = model.lmHead().storage.rt.policy.decode.fusedAnyRowsMaxBytes;
  // [n, k] of q (and o), k and v, gate and up, down.
  const weights = [[cfg.heads * cfg.headDim, cfg.hidden], [cfg.kvHeads * cfg.headDim, cfg.hidden], [cfg.intermediate, cfg.hidden], [cfg.hidden, cfg.intermediate]];
  return weights.every(([n, k]) => 4 * n * k <= bound);
}

/**
 * Whether a sampling step's LM head product for `rows` rows runs on the skinny kernels,
 * where an f16 copy of the head serves it: where the launcher would take that path
 * for the f32 head (up to policy.matmul.skinnyMaxRows rows of a wide head on real
 * GPUs), or with the fused layers forced.
 */
export function headOnSkinny(model: CausalLM, rows: number): boolean {
  const rt = model.lmHead().storage.rt;
  const cfg = model.config;
  if (rt.policy.decode.fused === 'never' || cfg.hidden % 4 !== 0) return false;
  if (rt.policy.decode.fused === 'always') return true;
  // A wide head from policy.tensorCores.wideMinRows rows runs on tensor cores in the
  // plain forward: at 32 rows the Qwen2.5-0.5B head took 0.33 ms there on the H200
  // against 0.99 ms on the skinny kernel, f16 copy or not (bench decode-matmul).
  const shape = { m: rows, n: cfg.vocabSize, k: cfg.hidden };
  return !shapeTakesTensorCores(rt, shape) && autoTile(rt, { ...shape, transB: true }) === SKINNY_TILE;
}

/** The Hugging Face name of the model's LM head weight (the embedding when tied). */
export function lmHeadName(model: CausalLM): string {
  return model.config.tieEmbeddings ? `${model.config.weightPrefix}embed_tokens.weight` : 'lm_head.weight';
}

/** The weights a fused decode step reads as products: every layer's projections, and the LM head. */
export function decodeWeightNames(model: CausalLM): string[] {
  const names: string[] = [];
  for (let l = 0; l < model.config.layers; l++) {
    for (const p of [...ATTENTION_PROJECTIONS, ...MLP_PROJECTIONS]) names.push(`${model.config.weightPrefix}layers.${l}.${p}.weight`);
  }
  return [...names, lmHeadName(model)];
}

/** The weight `name` as a fused step reads it: its f16 copy where the step has one. */
const weightOf = (model: CausalLM, name: string, half: HalfWeightMap | undefined): Weight => half?.get(name) ?? model.param(name);

/** Layer l's q, k and v projections (weights, biases) and the names of their stacked copies (models/half_weights.ts). */
export function stackedQkvNames(model: CausalLM, l: number): { weights: string[]; biases: string[]; weight: string; bias: string } {
  const names = layerNames(model, l);
  return { weights: names.attention.weights.slice(0, 3), biases: names.attention.biases.slice(0, 3), weight: names.qkvWeight, bias: names.qkvBias };
}

const ATTENTION_PROJECTIONS = ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.o_proj'];
const MLP_PROJECTIONS = ['mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'];

/** The names of a layer's parameters that a fused step reads. */
interface LayerNames {
  /** q, k, v and o projections' weights and biases. */
  attention: { weights: string[]; biases: string[] };
  /** gate, up and down projections' weights. */
  mlp: string[];
  /** The stacked q|k|v copies of a step's half weights. */
  qkvWeight: string;
  qkvBias: string;
  inputNorm: string;
  postNorm: string;
  qNorm: string;
  kNorm: string;
}

/**
 * Layer names by weight prefix and layer, made once: a decode step looks up a few dozen
 * parameters, and building their names again each step (and hashing the new strings in
 * the lookups) took about 0.4 us a dispatch of its host time (Bun).
 */
const layerNameCache = new Map<string, LayerNames[]>();

function layerNames(model: CausalLM, l: number): LayerNames {
  const prefix = model.config.weightPrefix;
  let layers = layerNameCache.get(prefix);
  if (!layers) layerNameCache.set(prefix, (layers = []));
  let names = layers[l];
  if (!names) {
    const pre = `${prefix}layers.${l}`;
    names = layers[l] = {
      attention: { weights: ATTENTION_PROJECTIONS.map((p) => `${pre}.${p}.weight`), biases: ATTENTION_PROJECTIONS.map((p) => `${pre}.${p}.bias`) },
      mlp: MLP_PROJECTIONS.map((p) => `${pre}.${p}.weight`),
      qkvWeight: `${pre}.self_attn.qkv_proj.weight`,
      qkvBias: `${pre}.self_attn.qkv_proj.bias`,
      inputNorm: `${pre}.input_layernorm.weight`,
      postNorm: `${pre}.post_attention_layernorm.weight`,
      qNorm: `${pre}.self_attn.q_norm.weight`,
      kNorm: `${pre}.self_attn.k_norm.weight`,
    };
  }
  return names;
}

/**
 * Whether layer l's attention (or MLP) block can take the fused kernels: it has no
 * LoRA branch, which they leave out, or the step reads f16 copies (`half`), which
 * carry the branches merged into their weights.
 */
export function fusable(model: CausalLM, l: number, block: 'attention' | 'mlp', half?: HalfWeightMap): boolean {
  if (half) return true;
  const names = layerNames(model, l);
  for (const name of block === 'attention' ? names.attention.weights : names.mlp) if (model.lora.has(name)) return false;
  return true;
}

/** x + o_proj(attention(...)) of layer l, appending this step's keys and values to the cache. */
export function fusedAttention(model: CausalLM, x: Tensor, l: number, step: LayerStep, cache: KVCache): Tensor {
  const cfg = model.config;
  const names = layerNames(model, l);
  const { weights: w, biases: b } = names.attention;
  const { batch: B, seq: T, offset } = step;
  // The f16 copies hold q|k|v stacked, run as one product.
  const stacked = step.halfWeights?.get(names.qkvWeight);
  const weights = stacked ? [stacked] : w.slice(0, 3).map((n) => model.param(n));
  const biases = !cfg.attentionBias ? null : stacked ? [step.halfWeights!.bias(names.qkvBias)!] : b.slice(0, 3).map((n) => model.param(n));
  const norm = { weight: model.param(names.inputNorm), eps: cfg.rmsEps };
  // The norm folds into the projections where the device has the binding that takes.
  const qkv = foldsNorm(x, B * T, weights[0]) && skinnyConcatTakesNorm(x.storage.rt)
    ? linearConcat(x, weights, biases, norm)
    : linearConcat(rmsNorm(x, norm.weight, norm.eps), weights, biases);
  const q = ropeQkvCache(qkv, step.positions, cache.keys[l], cache.values[l], offset, {
    heads: cfg.heads, kvHeads: cfg.kvHeads, headDim: cfg.headDim, theta: cfg.ropeTheta, rotaryDim: cfg.rotaryDim,
    qkNorm: cfg.qkNorm ? { q: model.param(names.qNorm), k: model.param(names.kNorm), eps: cfg.rmsEps } : undefined,
  });
  const o = attention(q, cache.keys[l], cache.values[l], { padLeft: step.pad, kvLen: offset + T });
  const merged = reshape(permute(o, [0, 2, 1, 3]), [B, T, cfg.heads * cfg.headDim]);
  const bias = cfg.outputBias ? model.param(b[3]) : null;
  return linearResidual(merged, weightOf(model, w[3], step.halfWeights), bias, x, { consume: true });
}

/** x + down_proj(silu(gate_proj(rms(x))) * up_proj(rms(x))) of layer l (reading `half`'s copies where given). */
export function fusedMlp(model: CausalLM, x: Tensor, l: number, half?: HalfWeightMap): Tensor {
  const cfg = model.config;
  const names = layerNames(model, l);
  const norm = { weight: model.param(names.postNorm), eps: cfg.rmsEps };
  const gate = weightOf(model, names.mlp[0], half);
  const up = weightOf(model, names.mlp[1], half);
  const act = foldsNorm(x, x.size / cfg.hidden, gate) ? linearSwiglu(x, gate, up, norm) : linearSwiglu(rmsNorm(x, norm.weight, norm.eps), gate, up);
  return linearResidual(act, weightOf(model, names.mlp[2], half), null, x, { consume: true });
}
