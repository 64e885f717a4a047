// Qwen3.5's hybrid decoder (transformers' Qwen3_5ForCausalLM, the text model of the
// multimodal checkpoints), on the tensor ops, with parameters under their HF names.
//
// Layer: x += mixer(norm(x)); x += down_proj(silu(gate_proj(norm(x))) * up_proj(norm(x)))
// with the mixer, per config.layerTypes:
//   linear_attention (Gated DeltaNet): q|k|v = silu(causal_conv1d(in_proj_qkv(h)));
//     q, k L2-normalised per head; beta = sigmoid(in_proj_b(h));
//     g = -exp(A_log) softplus(in_proj_a(h) + dt_bias); o = gated delta rule;
//     out_proj(rmsnorm(o) * norm.weight * silu(in_proj_z(h)))
//   full_attention: q_proj yields [query | gate] per head; q/k RMSNorm, partial RoPE,
//     causal GQA attention, o_proj(attention * sigmoid(gate))
// Every RMSNorm except the gated one scales by (1 + weight): the weights are stored
// zero-centred.

import type { CausalLM, LoraConfig, ModelCache, ParamMap } from './causal_lm.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { ConfigError } from '../hf_model/errors.ts';
import { checkTokenBatch, stepInputs, type PrefixBatch, type PrefixedRows, type SharedPrefixLayout, type TokenBatch } from './token_batch.ts';
import { attentionAfterPrefixes, prefixRows, sharedPrefixInputs, splitTokens } from './shared_prefix_pass.ts';
import { RecurrentCache } from './recurrent_cache.ts';
import { layerParams, layerStep } from './layer_step.ts';
import { project, type LoraBranch } from '../nn/linear.ts';
import { attention } from '../tensor/ops/attention.ts';
import { causalConv1d } from '../tensor/ops/conv1d.ts';
import { full } from '../tensor/ops/create.ts';
import { deltaDecay, gatedDeltaRule } from '../tensor/ops/delta_rule.ts';
import { add, addScalar, mul, sigmoid, silu } from '../tensor/ops/elementwise.ts';
import { embedding } from '../tensor/ops/embedding.ts';
import { linear } from '../tensor/ops/matmul.ts';
import { rmsNorm } from '../tensor/ops/rmsnorm.ts';
import { ropeHeads } from '../tensor/ops/rope.ts';
import { assignSlice, concat, permute, reshape, slice } from '../tensor/ops/shape_ops.ts';
import { swiglu } from '../tensor/ops/swiglu.ts';
import { ShapeError } from '../tensor/errors.ts';
import { keep } from '../tensor/scope.ts';
import { tensor, type Tensor } from '../tensor/tensor.ts';

/**
 * What one forward pass shares across layers. A pass after shared prefixes
 * (`shared`) runs its tokens as one row, B = 1 and T = all of them: the prefixes'
 * then the rows' (models/shared_prefix_pass.ts).
 */
interface Pass {
  B: number;
  T: number;
  offset: number;
  positions: Tensor;
  pad: Tensor | undefined;
  cache: RecurrentCache | null;
  shared?: SharedPrefixLayout;
}

export class Qwen35Model implements CausalLM {
  readonly lora = new Map<string, LoraBranch>();
  loraConfig: LoraConfig | null = null;
  checkpointLayers = false;
  /** Parts of the checkpoint this text model leaves out (MTP heads, the vision tower), in words. */
  skipped: string[] = [];
  /** Constant 1/sqrt(d) weights that turn RMSNorm into L2 normalisation, by width. */
  private l2Weights = new Map<number, Tensor>();

  constructor(
    readonly config: ModelConfig,
    readonly params: ParamMap,
  ) {
    if (config.family !== 'qwen3_5') throw new ConfigError(`Qwen35Model: config is ${config.family}, not qwen3_5`);
    if (config.layerTypes.includes('linear_attention') && !config.linearAttention) {
      throw new ConfigError('Qwen35Model: linear_attention layers need the linear_* settings');
    }
  }

  param(name: string): Tensor {
    const t = this.params.get(name);
    if (!t) throw new ShapeError(`model has no parameter "${name}"`);
    return t;
  }

  lmHead(): Tensor {
    return this.config.tieEmbeddings ? this.param(`${this.config.weightPrefix}embed_tokens.weight`) : this.param('lm_head.weight');
  }

  private proj(x: Tensor, prefix: string, bias = false): Tensor {
    const w = `${prefix}.weight`;
    return project(x, this.param(w), bias ? this.params.get(`${prefix}.bias`) : null, this.lora.get(w));
  }

  /** RMSNorm with zero-centred weights: scales by (1 + weight). */
  private norm(x: Tensor, name: string): Tensor {
    return rmsNorm(x, addScalar(this.param(name), 1), this.config.rmsEps);
  }

  hidden(batch: TokenBatch): Tensor {
    return this.run(batch, null);
  }

  hiddenCached(batch: TokenBatch, cache: ModelCache): Tensor {
    if (!(cache instanceof RecurrentCache)) throw new ShapeError('forward: Qwen3.5 needs the cache its newCache makes');
    if (batch.batch !== cache.batch) throw new ShapeError(`forward: batch ${batch.batch} does not match the cache's ${cache.batch}`);
    if (cache.length + batch.seq > cache.capacity) throw new ShapeError(`forward: ${cache.length} + ${batch.seq} tokens exceed the cache capacity ${cache.capacity}`);
    const out = this.run({ ...batch, padLeft: cache.padLeft }, cache);
    cache.length += batch.seq;
    return out;
  }

  newCache(batch: number, capacity: number, padLeft?: Int32Array): RecurrentCache {
    return RecurrentCache.create(this.config, batch, capacity, padLeft);
  }

  hiddenAfterPrefixes(prefixes: PrefixBatch, rows: PrefixedRows): Tensor {
    const flat = sharedPrefixInputs(prefixes, rows);
    const N = flat.ids.length;
    const h = this.layers(flat.ids, { B: 1, T: N, offset: 0, positions: flat.rows.positions, pad: undefined, cache: null, shared: flat });
    return reshape(slice(h, 1, flat.front, N), [rows.batch, rows.seq, this.config.hidden]);
  }

  logits(batch: TokenBatch): Tensor {
    return linear(this.hidden(batch), this.lmHead());
  }

  parameters(): Tensor[] {
    return [...this.params.values()];
  }

  private run(batch: TokenBatch, cache: RecurrentCache | null): Tensor {
    const offset = cache?.length ?? 0;
    checkTokenBatch(batch, offset, cache?.capacity);
    return this.layers(batch.ids, { B: batch.batch, T: batch.seq, offset, cache, ...stepInputs(batch, offset) });
  }

  /** The decoder's layers and final norm over `ids` [pass.B, pass.T]. */
  private layers(ids: Int32Array | Tensor, pass: Pass): Tensor {
    const cfg = this.config;
    const pre = cfg.weightPrefix;
    let x = embedding(this.param(`${pre}embed_tokens.weight`), ids, [pass.B, pass.T]);
    for (let l = 0; l < cfg.layers; l++) {
      const at = `${pre}layers.${l}`;
      x = layerStep(x, (x) => {
        const h = this.norm(x, `${at}.input_layernorm.weight`);
        const mixed = cfg.layerTypes[l] === 'linear_attention' ? this.linearAttention(h, l, pass) : this.fullAttention(h, l, pass);
        const mid = add(x, mixed);
        const h2 = this.norm(mid, `${at}.post_attention_layernorm.weight`);
        const act = swiglu(this.proj(h2, `${at}.mlp.gate_proj`), this.proj(h2, `${at}.mlp.up_proj`));
        return add(mid, this.proj(act, `${at}.mlp.down_proj`));
      }, () => layerParams(this, l), this.checkpointLayers);
    }
    return this.norm(x, `${pre}norm.weight`);
  }

  /** x * rsqrt(sum(x^2) + 1e-6) over the last dim, as an RMSNorm with constant weights. */
  private l2Normalize(x: Tensor): Tensor {
    const d = x.shape[x.rank - 1];
    let w = this.l2Weights.get(d);
    if (!w) this.l2Weights.set(d, (w = keep(full([d], 1 / Math.sqrt(d)))));
    return rmsNorm(x, w, 1e-6 / d);
  }

  private linearAttention(h: Tensor, l: number, pass: Pass): Tensor {
    const lin = this.config.linearAttention!;
    const { B, T } = pass;
    const a = `${this.config.weightPrefix}layers.${l}.linear_attn`;
    const valueDim = lin.numValueHeads * lin.valueHeadDim;
    const inputs = { qkv: this.proj(h, `${a}.in_proj_qkv`), b: this.proj(h, `${a}.in_proj_b`), a: this.proj(h, `${a}.in_proj_a`) };
    let o: Tensor;
    if (pass.shared) {
      // Each row's recurrence runs over its prefix's inputs again (it needs the state after them); the rest of
      // the layer, and the prefixes' own outputs, once a token.
      const { rows, prefixes } = pass.shared;
      const parts = (t: Tensor) => splitTokens(t, rows, prefixes, 1);
      const split = { qkv: parts(inputs.qkv), b: parts(inputs.b), a: parts(inputs.a) };
      const own = this.mix(l, split.qkv.prefix, split.b.prefix, split.a.prefix, { pad: prefixes.pad });
      const after = (s: { prefix: Tensor; rows: Tensor }) => concat([prefixRows(s.prefix, prefixes.of), s.rows], 1);
      const full = this.mix(l, after(split.qkv), after(split.b), after(split.a), { pad: rows.pad });
      const tail = slice(full, 1, prefixes.seq, prefixes.seq + rows.seq);
      const flat = (t: Tensor) => reshape(t, [t.shape[0] * t.shape[1], lin.numValueHeads, lin.valueHeadDim]);
      o = reshape(concat([flat(own), flat(tail)], 0), [B, T, lin.numValueHeads, lin.valueHeadDim]);
    } else {
      const state = pass.cache?.linear[l] ?? undefined;
      o = this.mix(l, inputs.qkv, inputs.b, inputs.a, { pad: pass.pad, offset: pass.offset, state });
    }
    const z = reshape(this.proj(h, `${a}.in_proj_z`), [B, T, lin.numValueHeads, lin.valueHeadDim]);
    const gated = mul(rmsNorm(o, this.param(`${a}.norm.weight`), this.config.rmsEps), silu(z));
    return this.proj(reshape(gated, [B, T, valueDim]), `${a}.out_proj`);
  }

  /**
   * The gated delta rule's output [b, t, Hv, Dv] from layer l's projections of the
   * sequences [b, t, ...]: q|k|v through the short convolution, then the recurrence
   * (continuing a cache's states where given).
   */
  private mix(l: number, qkvIn: Tensor, bIn: Tensor, aIn: Tensor, o: { pad?: Tensor; offset?: number; state?: { conv: Tensor; recurrent: Tensor } }): Tensor {
    const lin = this.config.linearAttention!;
    const a = `${this.config.weightPrefix}layers.${l}.linear_attn`;
    const [B, T] = qkvIn.shape;
    const keyDim = lin.numKeyHeads * lin.keyHeadDim;
    const valueDim = lin.numValueHeads * lin.valueHeadDim;
    const qkv = causalConv1d(qkvIn, this.param(`${a}.conv1d.weight`), { silu: true, padLeft: o.pad, offset: o.offset, state: o.state?.conv });
    const heads = (from: number, to: number, n: number, d: number) => reshape(slice(qkv, 2, from, to), [B, T, n, d]);
    const q = this.l2Normalize(heads(0, keyDim, lin.numKeyHeads, lin.keyHeadDim));
    const k = this.l2Normalize(heads(keyDim, 2 * keyDim, lin.numKeyHeads, lin.keyHeadDim));
    const v = heads(2 * keyDim, 2 * keyDim + valueDim, lin.numValueHeads, lin.valueHeadDim);
    const beta = sigmoid(bIn);
    const g = deltaDecay(aIn, this.param(`${a}.A_log`), this.param(`${a}.dt_bias`));
    return gatedDeltaRule(q, k, v, g, beta, { padLeft: o.pad, offset: o.offset, state: o.state?.recurrent });
  }

  private fullAttention(h: Tensor, l: number, pass: Pass): Tensor {
    const cfg = this.config;
    const { B, T, offset, cache } = pass;
    const a = `${cfg.weightPrefix}layers.${l}.self_attn`;
    const hd = cfg.headDim;
    const bias = cfg.attentionBias;
    const ropeOpts = { theta: cfg.ropeTheta, rotaryDim: cfg.rotaryDim };
    let q = this.proj(h, `${a}.q_proj`, bias);
    let gate: Tensor | null = null;
    if (cfg.attnOutputGate) {
      const both = reshape(q, [B, T, cfg.heads, 2 * hd]);
      q = slice(both, 3, 0, hd);
      gate = reshape(slice(both, 3, hd, 2 * hd), [B, T, cfg.heads * hd]);
    }
    // [B, T, n, hd], normed where the layer has a norm.
    const normed = (t: Tensor, n: number, norm: string | null) => {
      const r = reshape(t, [B, T, n, hd]);
      return norm ? this.norm(r, `${a}.${norm}.weight`) : r;
    };
    const qn = normed(q, cfg.heads, 'q_norm');
    const kn = normed(this.proj(h, `${a}.k_proj`, bias), cfg.kvHeads, 'k_norm');
    const vn = normed(this.proj(h, `${a}.v_proj`, bias), cfg.kvHeads, null);
    let merged: Tensor;
    if (pass.shared) {
      const tokens = (t: Tensor) => reshape(t, [T, t.shape[2], hd]);
      merged = reshape(attentionAfterPrefixes(tokens(qn), tokens(kn), tokens(vn), pass.shared, ropeOpts), [B, T, cfg.heads * hd]);
    } else {
      const qh = ropeHeads(qn, pass.positions, ropeOpts);
      let k = ropeHeads(kn, pass.positions, ropeOpts);
      let v = permute(vn, [0, 2, 1, 3]);
      const kv = cache?.attention[l];
      if (kv) {
        assignSlice(kv.keys, k, 2, offset);
        assignSlice(kv.values, v, 2, offset);
        k = kv.keys;
        v = kv.values;
      }
      const o = attention(qh, k, v, { padLeft: pass.pad, kvLen: offset + T });
      merged = reshape(permute(o, [0, 2, 1, 3]), [B, T, cfg.heads * hd]);
    }
    if (gate) merged = mul(merged, sigmoid(gate));
    return this.proj(merged, `${a}.o_proj`, cfg.outputBias);
  }
}
