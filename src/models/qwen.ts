// The Qwen2 / Qwen2.5 / Qwen3 decoder, built from differentiable tensor ops over
// parameters kept under their Hugging Face names (loading and saving is a name map).
//
// Layer: x += o_proj(attention(rope(norm_q(q_proj(rms(x)))), rope(norm_k(k_proj(..))), v_proj(..)))
//        x += down_proj(silu(gate_proj(rms(x))) * up_proj(rms(x)))
// Qwen2 has q/k/v biases; Qwen3 has per-head RMSNorm on q and k and an explicit head_dim.

import type { CausalLM, LoraConfig, ParamMap } from './causal_lm.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { project, type LoraBranch } from '../nn/linear.ts';
import { attention } from '../tensor/ops/attention.ts';
import { add } from '../tensor/ops/elementwise.ts';
import { embedding } from '../tensor/ops/embedding.ts';
import { rmsNorm } from '../tensor/ops/rmsnorm.ts';
import { ropeHeads } from '../tensor/ops/rope.ts';
import { assignSlice, permute, reshape, slice } from '../tensor/ops/shape_ops.ts';
import { swiglu } from '../tensor/ops/swiglu.ts';
import { linear } from '../tensor/ops/matmul.ts';
import { ShapeError } from '../tensor/errors.ts';
import { tensor, type Tensor } from '../tensor/tensor.ts';
import { KVCache } from './kv_cache.ts';
import { layerParams, layerStep } from './layer_step.ts';
import { fusable, fusedAttention, fusedMlp, fusesStep } from './qwen_decode.ts';
import { checkTokenBatch, stepInputs, type LayerStep, type PrefixBatch, type PrefixedRows, type TokenBatch } from './token_batch.ts';
import { attentionAfterPrefixes, sharedPrefixInputs } from './shared_prefix_pass.ts';

export class QwenModel implements CausalLM {
  /** LoRA branches by the HF name of the linear weight they adapt. */
  readonly lora = new Map<string, LoraBranch>();
  loraConfig: LoraConfig | null = null;
  checkpointLayers = false;

  constructor(
    readonly config: ModelConfig,
    readonly params: ParamMap,
  ) {}

  param(name: string): Tensor {
    const t = this.params.get(name);
    if (!t) throw new ShapeError(`model has no parameter "${name}"`);
    return t;
  }

  private optional(name: string): Tensor | null {
    return this.params.get(name) ?? null;
  }

  /** The LM head weight [vocab, hidden] (the embedding when tied). */
  lmHead(): Tensor {
    return this.config.tieEmbeddings ? this.param(`${this.prefix}embed_tokens.weight`) : this.param('lm_head.weight');
  }

  private proj(x: Tensor, prefix: string, bias: boolean): Tensor {
    const w = `${prefix}.weight`;
    return project(x, this.param(w), bias ? this.optional(`${prefix}.bias`) : null, this.lora.get(w));
  }

  private get prefix(): string {
    return this.config.weightPrefix;
  }

  /** Final hidden states [batch, seq, hidden] (after the last RMSNorm). */
  hidden(batch: TokenBatch): Tensor {
    return this.run(batch, null);
  }

  /**
   * Hidden states of `batch` (new tokens only) continuing the sequences in `cache`;
   * their keys and values are appended to the cache.
   */
  hiddenCached(batch: TokenBatch, cache: KVCache): Tensor {
    if (batch.batch !== cache.batch) throw new ShapeError(`forward: batch ${batch.batch} does not match the cache's ${cache.batch}`);
    if (cache.length + batch.seq > cache.capacity) throw new ShapeError(`forward: ${cache.length} + ${batch.seq} tokens exceed the cache capacity ${cache.capacity}`);
    const out = this.run({ ...batch, padLeft: cache.padLeft }, cache);
    cache.length += batch.seq;
    return out;
  }

  /** One list of tokens, the prefixes' then the rows' (models/shared_prefix_pass.ts); only attention sees the layout. */
  hiddenAfterPrefixes(prefixes: PrefixBatch, rows: PrefixedRows): Tensor {
    const cfg = this.config;
    const flat = sharedPrefixInputs(prefixes, rows);
    const step: LayerStep = { batch: rows.batch, seq: rows.seq, positions: flat.rows.positions, pad: flat.rows.pad, cache: null, offset: 0, shared: flat };
    let x = embedding(this.param(`${this.prefix}embed_tokens.weight`), flat.ids, [flat.ids.length]);
    for (let l = 0; l < cfg.layers; l++) {
      x = layerStep(x, (x) => this.mlpBlock(this.attentionBlock(x, l, step), l), () => layerParams(this, l), this.checkpointLayers);
    }
    const h = rmsNorm(x, this.param(`${this.prefix}norm.weight`), cfg.rmsEps);
    return reshape(slice(h, 0, flat.front, flat.ids.length), [rows.batch, rows.seq, cfg.hidden]);
  }

  private run(batch: TokenBatch, cache: KVCache | null): Tensor {
    checkTokenBatch(batch, cache ? cache.length : 0, cache?.capacity);
    const cfg = this.config;
    const { batch: B, seq: T } = batch;
    const offset = cache?.length ?? 0;
    const step: LayerStep = {
      batch: B,
      seq: T,
      ...stepInputs(batch, offset),
      cache,
      offset,
      halfWeights: batch.halfWeights,
    };
    // Decode steps under noGrad take the fused kernels (qwen_decode.ts) where they apply.
    const decode = fusesStep(this, B, T, cache, batch.halfWeights) ? cache : null;
    let x = embedding(this.param(`${this.prefix}embed_tokens.weight`), batch.ids, [B, T]);
    for (let l = 0; l < cfg.layers; l++) {
      x = layerStep(x, (x) => {
        const h = decode && fusable(this, l, 'attention', step.halfWeights) ? fusedAttention(this, x, l, step, decode) : this.attentionBlock(x, l, step);
        return decode && fusable(this, l, 'mlp', step.halfWeights) ? fusedMlp(this, h, l, step.halfWeights) : this.mlpBlock(h, l);
      }, () => layerParams(this, l), this.checkpointLayers);
    }
    return rmsNorm(x, this.param(`${this.prefix}norm.weight`), cfg.rmsEps);
  }

  /** x + o_proj(attention(...)) of layer l; with a cache, this step's keys and values are appended to it. */
  private attentionBlock(x: Tensor, l: number, step: LayerStep): Tensor {
    const cfg = this.config;
    const pre = `${this.prefix}layers.${l}`;
    const h = rmsNorm(x, this.param(`${pre}.input_layernorm.weight`), cfg.rmsEps);
    // [...tokens, heads, headDim]: the rows' [B, T] or, after shared prefixes, the flat tokens.
    const project = (name: 'q' | 'k' | 'v', n: number) => {
      let t = reshape(this.proj(h, `${pre}.self_attn.${name}_proj`, cfg.attentionBias), [...x.shape.slice(0, -1), n, cfg.headDim]);
      if (cfg.qkNorm && name !== 'v') t = rmsNorm(t, this.param(`${pre}.self_attn.${name}_norm.weight`), cfg.rmsEps);
      return t;
    };
    const q = project('q', cfg.heads);
    const k = project('k', cfg.kvHeads);
    const v = project('v', cfg.kvHeads);
    const merged = step.shared ? attentionAfterPrefixes(q, k, v, step.shared, { theta: cfg.ropeTheta, rotaryDim: cfg.rotaryDim }) : this.attend(q, k, v, l, step);
    return add(x, this.proj(merged, `${pre}.self_attn.o_proj`, cfg.outputBias));
  }

  /** [B, T, n, D] -> [B, n, T, D], rotated at `positions` unless values. */
  private heads(t: Tensor, positions: Tensor, rotate: boolean): Tensor {
    return rotate ? ropeHeads(t, positions, { theta: this.config.ropeTheta, rotaryDim: this.config.rotaryDim }) : permute(t, [0, 2, 1, 3]);
  }

  /** Attention of the batch's rows over their own keys (and the cache's), merged to [B, T, heads x D]. */
  private attend(q: Tensor, k: Tensor, v: Tensor, l: number, step: LayerStep): Tensor {
    const { batch: B, seq: T, cache, offset } = step;
    let keys = this.heads(k, step.positions, true);
    let values = this.heads(v, step.positions, false);
    if (cache) {
      assignSlice(cache.keys[l], keys, 2, offset);
      assignSlice(cache.values[l], values, 2, offset);
      keys = cache.keys[l];
      values = cache.values[l];
    }
    const o = attention(this.heads(q, step.positions, true), keys, values, { padLeft: step.pad, kvLen: offset + T });
    return reshape(permute(o, [0, 2, 1, 3]), [B, T, this.config.heads * this.config.headDim]);
  }

  /** x + down_proj(silu(gate_proj(rms(x))) * up_proj(rms(x))) of layer l. */
  private mlpBlock(x: Tensor, l: number): Tensor {
    const pre = `${this.prefix}layers.${l}`;
    const h = rmsNorm(x, this.param(`${pre}.post_attention_layernorm.weight`), this.config.rmsEps);
    const act = swiglu(this.proj(h, `${pre}.mlp.gate_proj`, false), this.proj(h, `${pre}.mlp.up_proj`, false));
    return add(x, this.proj(act, `${pre}.mlp.down_proj`, false));
  }

  /** An empty KV cache for `batch` sequences of up to `capacity` tokens. */
  newCache(batch: number, capacity: number, padLeft?: Int32Array): KVCache {
    return KVCache.create(this.config, batch, capacity, padLeft);
  }

  /** Full logits [batch, seq, vocab]; for small vocabularies and tests (training uses tokenLogprobs). */
  logits(batch: TokenBatch): Tensor {
    return linear(this.hidden(batch), this.lmHead());
  }

  parameters(): Tensor[] {
    return [...this.params.values()];
  }
}
