// Hugging Face config.json for the Qwen family, normalised into one ModelConfig.
//
// Accepts what transformers 4.x and 5.x write (rope_theta or rope_parameters, torch_dtype
// or dtype) for qwen2 (Qwen2, Qwen2.5), qwen3 and Qwen3.5 (qwen3_5_text, or qwen3_5
// with the text settings under text_config). Anything the model code would silently
// compute differently from transformers (scaled RoPE, sliding windows, experts, other
// activations) is refused with the field named, rather than loaded and run wrong.

import { z } from 'zod';
import { ConfigError } from './errors.ts';

export type ModelFamily = 'qwen2' | 'qwen3' | 'qwen3_5';
export type LayerType = 'full_attention' | 'linear_attention';

/** Gated DeltaNet settings of Qwen3.5's linear-attention layers. */
export interface LinearAttentionConfig {
  numKeyHeads: number;
  numValueHeads: number;
  keyHeadDim: number;
  valueHeadDim: number;
  convKernel: number;
}

export interface ModelConfig {
  family: ModelFamily;
  architecture: string;
  vocabSize: number;
  hidden: number;
  intermediate: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ropeTheta: number;
  /** Leading dims of each head that RoPE rotates: headDim, or a fraction of it in Qwen3.5. */
  rotaryDim: number;
  rmsEps: number;
  tieEmbeddings: boolean;
  /** Biases on q_proj, k_proj, v_proj. */
  attentionBias: boolean;
  /** Bias on o_proj (Qwen3's attention_bias covers all four projections, Qwen2's biases only q/k/v). */
  outputBias: boolean;
  qkNorm: boolean;
  /** Qwen3.5 full attention: q_proj yields [query | sigmoid gate] per head, doubling its rows. */
  attnOutputGate: boolean;
  layerTypes: LayerType[];
  linearAttention: LinearAttentionConfig | null;
  /** Multi-token-prediction layers stored under mtp.* (transformers ignores them; so do we). */
  mtpLayers: number;
  maxPositions: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
  torchDtype: string | null;
  /** Prefix of the decoder's parameter names: 'model.', or 'model.language_model.' in multimodal Qwen3.5. */
  weightPrefix: string;
  /** config.json as read, kept so export writes back every key transformers and vLLM expect. */
  raw: Record<string, unknown>;
}

const ARCHITECTURES: Record<string, string[]> = {
  qwen2: ['Qwen2ForCausalLM'],
  qwen3: ['Qwen3ForCausalLM'],
  qwen3_5_text: ['Qwen3_5ForCausalLM'],
  qwen3_5: ['Qwen3_5ForConditionalGeneration'],
};

const MOE_FIELDS = ['num_experts', 'num_local_experts', 'n_routed_experts', 'num_experts_per_tok', 'moe_intermediate_size', 'shared_expert_intermediate_size'];

const posInt = z.number().int().positive();
const tokenId = z.number().int().nonnegative();

const textSchema = z.looseObject({
  vocab_size: posInt,
  hidden_size: posInt,
  intermediate_size: posInt,
  num_hidden_layers: posInt,
  num_attention_heads: posInt,
  num_key_value_heads: posInt.optional(),
  head_dim: posInt.nullish(),
  rms_norm_eps: z.number().positive().optional(),
  rope_theta: z.number().positive().optional(),
  rope_parameters: z.looseObject({
    rope_type: z.string().optional(),
    rope_theta: z.number().positive().optional(),
    partial_rotary_factor: z.number().gt(0).lte(1).optional(),
  }).nullish(),
  partial_rotary_factor: z.number().gt(0).lte(1).optional(),
  max_position_embeddings: posInt.optional(),
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  hidden_act: z.string().optional(),
  bos_token_id: tokenId.nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId)]).nullish(),
  pad_token_id: tokenId.nullish(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  use_sliding_window: z.boolean().optional(),
  layer_types: z.array(z.string()).optional(),
  attn_output_gate: z.boolean().optional(),
  full_attention_interval: posInt.optional(),
  linear_num_key_heads: posInt.optional(),
  linear_num_value_heads: posInt.optional(),
  linear_key_head_dim: posInt.optional(),
  linear_value_head_dim: posInt.optional(),
  linear_conv_kernel_dim: posInt.optional(),
  mtp_num_hidden_layers: z.number().int().nonnegative().optional(),
});

type TextFields = z.infer<typeof textSchema>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Parses a config.json object. `source` names the file in error messages.
 * Throws ConfigError naming the offending field for anything unsupported.
 */
export function parseConfig(raw: unknown, source = 'config.json'): ModelConfig {
  if (!isObject(raw)) throw new ConfigError(`${source}: expected a JSON object`);
  const modelType = raw.model_type;
  if (typeof modelType !== 'string' || !(modelType in ARCHITECTURES)) {
    throw new ConfigError(`${source}: model_type ${JSON.stringify(modelType)} is not supported (supported: ${Object.keys(ARCHITECTURES).join(', ')})`);
  }
  const architecture = checkArchitectures(raw, modelType, source);
  let text: Record<string, unknown> = raw;
  let at = '';
  if (modelType === 'qwen3_5') {
    if (!isObject(raw.text_config)) throw new ConfigError(`${source}: text_config is missing (model_type qwen3_5 keeps the text model's settings there)`);
    text = raw.text_config;
    at = 'text_config.';
    if (text.model_type !== undefined && text.model_type !== 'qwen3_5_text') {
      throw new ConfigError(`${source}: text_config.model_type ${JSON.stringify(text.model_type)} is not supported (expected qwen3_5_text)`);
    }
  }
  refuseUnsupported(text, at, source);
  const parsed = textSchema.safeParse(text);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`${source}: ${at}${issue.path.join('.')}: ${issue.message}`);
  }
  const family: ModelFamily = modelType === 'qwen2' ? 'qwen2' : modelType === 'qwen3' ? 'qwen3' : 'qwen3_5';
  const tie = parsed.data.tie_word_embeddings ?? (typeof raw.tie_word_embeddings === 'boolean' ? raw.tie_word_embeddings : false);
  return normalise(parsed.data, family, architecture, tie, modelType === 'qwen3_5' ? 'model.language_model.' : 'model.', structuredClone(raw), at, source);
}

function checkArchitectures(raw: Record<string, unknown>, modelType: string, source: string): string {
  const allowed = ARCHITECTURES[modelType];
  const archs = raw.architectures;
  if (archs === undefined || archs === null) return allowed[0];
  if (!Array.isArray(archs) || archs.length !== 1 || typeof archs[0] !== 'string') {
    throw new ConfigError(`${source}: architectures must list exactly one class, got ${JSON.stringify(archs)}`);
  }
  if (!allowed.includes(archs[0])) {
    throw new ConfigError(`${source}: architectures ${JSON.stringify(archs[0])} is not supported for model_type ${modelType} (expected ${allowed.join(' or ')})`);
  }
  return archs[0];
}

function refuseUnsupported(text: Record<string, unknown>, at: string, source: string): void {
  if (text.rope_scaling !== undefined && text.rope_scaling !== null) {
    throw new ConfigError(`${source}: ${at}rope_scaling ${JSON.stringify(text.rope_scaling)} is not supported (only plain RoPE; rope_scaling must be null)`);
  }
  const rp = text.rope_parameters;
  if (isObject(rp) && rp.rope_type !== undefined && rp.rope_type !== 'default') {
    throw new ConfigError(`${source}: ${at}rope_parameters.rope_type ${JSON.stringify(rp.rope_type)} is not supported (only "default")`);
  }
  if (text.use_sliding_window === true) {
    throw new ConfigError(`${source}: ${at}use_sliding_window is true (sliding_window ${JSON.stringify(text.sliding_window)}); sliding-window attention is not supported`);
  }
  for (const field of MOE_FIELDS) {
    const v = text[field];
    if (typeof v === 'number' && v > 0) {
      throw new ConfigError(`${source}: ${at}${field} is ${v}; mixture-of-experts models are not supported`);
    }
  }
  if (text.hidden_act !== undefined && text.hidden_act !== 'silu') {
    throw new ConfigError(`${source}: ${at}hidden_act ${JSON.stringify(text.hidden_act)} is not supported (only silu)`);
  }
}

function normalise(
  t: TextFields, family: ModelFamily, architecture: string, tieEmbeddings: boolean,
  weightPrefix: string, raw: Record<string, unknown>, at: string, source: string,
): ModelConfig {
  const fail = (field: string, why: string): never => {
    throw new ConfigError(`${source}: ${at}${field} ${why}`);
  };
  const heads = t.num_attention_heads;
  const kvHeads = t.num_key_value_heads ?? heads;
  if (heads % kvHeads !== 0) fail('num_key_value_heads', `(${kvHeads}) must divide num_attention_heads (${heads})`);
  let headDim: number;
  if (t.head_dim != null) headDim = t.head_dim;
  else if (family === 'qwen3') headDim = 128;
  else if (family === 'qwen3_5') headDim = 256;
  else {
    if (t.hidden_size % heads !== 0) fail('hidden_size', `(${t.hidden_size}) is not a multiple of num_attention_heads (${heads})`);
    headDim = t.hidden_size / heads;
  }
  const factor = family === 'qwen3_5' ? (t.rope_parameters?.partial_rotary_factor ?? t.partial_rotary_factor ?? 0.25) : 1;
  if (family !== 'qwen3_5') {
    const f = t.rope_parameters?.partial_rotary_factor ?? t.partial_rotary_factor;
    if (f !== undefined && f !== 1) fail('partial_rotary_factor', `is ${f}; partial RoPE is only supported for Qwen3.5`);
  }
  const rotaryDim = Math.round(headDim * factor);
  if (rotaryDim % 2 !== 0 || Math.abs(rotaryDim - headDim * factor) > 1e-9) {
    fail('partial_rotary_factor', `(${factor}) times head_dim (${headDim}) must be an even integer`);
  }
  const layerTypes = layerTypesOf(t, family, fail);
  const linearAttention = layerTypes.includes('linear_attention') ? linearOf(t, fail) : null;
  const eos = t.eos_token_id;
  const bias = family === 'qwen2' ? true : (t.attention_bias ?? false);
  return {
    family,
    architecture,
    vocabSize: t.vocab_size,
    hidden: t.hidden_size,
    intermediate: t.intermediate_size,
    layers: t.num_hidden_layers,
    heads,
    kvHeads,
    headDim,
    ropeTheta: t.rope_parameters?.rope_theta ?? t.rope_theta ?? 10000,
    rotaryDim,
    rmsEps: t.rms_norm_eps ?? 1e-6,
    tieEmbeddings,
    attentionBias: bias,
    outputBias: family === 'qwen2' ? false : bias,
    qkNorm: family !== 'qwen2',
    attnOutputGate: family === 'qwen3_5' ? (t.attn_output_gate ?? true) : false,
    layerTypes,
    linearAttention,
    mtpLayers: t.mtp_num_hidden_layers ?? 0,
    maxPositions: t.max_position_embeddings ?? 32768,
    bosTokenId: t.bos_token_id ?? null,
    eosTokenIds: eos == null ? [] : Array.isArray(eos) ? [...eos] : [eos],
    padTokenId: t.pad_token_id ?? null,
    torchDtype: t.dtype ?? t.torch_dtype ?? (typeof raw.dtype === 'string' ? raw.dtype : typeof raw.torch_dtype === 'string' ? raw.torch_dtype : null),
    weightPrefix,
    raw,
  };
}

function layerTypesOf(t: TextFields, family: ModelFamily, fail: (field: string, why: string) => never): LayerType[] {
  const n = t.num_hidden_layers;
  if (t.layer_types === undefined) {
    if (family !== 'qwen3_5') return Array.from({ length: n }, () => 'full_attention');
    const interval = t.full_attention_interval ?? 4;
    return Array.from({ length: n }, (_, i) => ((i + 1) % interval === 0 ? 'full_attention' : 'linear_attention'));
  }
  if (t.layer_types.length !== n) fail('layer_types', `has ${t.layer_types.length} entries for ${n} layers (num_hidden_layers)`);
  const allowed = family === 'qwen3_5' ? ['full_attention', 'linear_attention'] : ['full_attention'];
  return t.layer_types.map((kind, i) => {
    if (!allowed.includes(kind)) fail(`layer_types[${i}]`, `${JSON.stringify(kind)} is not supported (allowed: ${allowed.join(', ')})`);
    return kind as LayerType;
  });
}

function linearOf(t: TextFields, fail: (field: string, why: string) => never): LinearAttentionConfig {
  const need = (field: keyof TextFields): number => {
    const v = t[field];
    if (typeof v !== 'number') fail(String(field), 'is missing (needed by the linear_attention layers)');
    return v as number;
  };
  const lin = {
    numKeyHeads: need('linear_num_key_heads'),
    numValueHeads: need('linear_num_value_heads'),
    keyHeadDim: need('linear_key_head_dim'),
    valueHeadDim: need('linear_value_head_dim'),
    convKernel: need('linear_conv_kernel_dim'),
  };
  if (lin.numValueHeads % lin.numKeyHeads !== 0) {
    fail('linear_num_key_heads', `(${lin.numKeyHeads}) must divide linear_num_value_heads (${lin.numValueHeads})`);
  }
  return lin;
}

/**
 * config.json for `cfg`: its raw keys with the normalised fields written back over them,
 * so a config edited after parsing (fewer layers, another vocab) exports consistently.
 */
export function toHfConfig(cfg: ModelConfig, opts: { dtype?: string } = {}): Record<string, unknown> {
  if (cfg.layerTypes.length !== cfg.layers) {
    throw new ConfigError(`toHfConfig: layerTypes has ${cfg.layerTypes.length} entries for ${cfg.layers} layers`);
  }
  const out = structuredClone(cfg.raw);
  const text = isObject(out.text_config) ? out.text_config : out;
  text.vocab_size = cfg.vocabSize;
  text.hidden_size = cfg.hidden;
  text.intermediate_size = cfg.intermediate;
  text.num_hidden_layers = cfg.layers;
  text.num_attention_heads = cfg.heads;
  text.num_key_value_heads = cfg.kvHeads;
  if (cfg.family !== 'qwen2' || 'head_dim' in text || cfg.headDim * cfg.heads !== cfg.hidden) text.head_dim = cfg.headDim;
  if (cfg.family !== 'qwen2') text.attention_bias = cfg.attentionBias;
  text.rms_norm_eps = cfg.rmsEps;
  text.max_position_embeddings = cfg.maxPositions;
  text.tie_word_embeddings = cfg.tieEmbeddings;
  if (text !== out && 'tie_word_embeddings' in out) out.tie_word_embeddings = cfg.tieEmbeddings;
  if (isObject(text.rope_parameters)) text.rope_parameters.rope_theta = cfg.ropeTheta;
  else text.rope_theta = cfg.ropeTheta;
  if (cfg.family === 'qwen3_5' || 'layer_types' in text) text.layer_types = [...cfg.layerTypes];
  text.bos_token_id = cfg.bosTokenId;
  text.eos_token_id = cfg.eosTokenIds.length === 0 ? null : cfg.eosTokenIds.length === 1 ? cfg.eosTokenIds[0] : [...cfg.eosTokenIds];
  if (cfg.padTokenId !== null || 'pad_token_id' in text) text.pad_token_id = cfg.padTokenId;
  const dtype = opts.dtype ?? cfg.torchDtype;
  if (dtype !== null) {
    const key = 'dtype' in out && !('torch_dtype' in out) ? 'dtype' : 'torch_dtype';
    out[key] = dtype;
    if (text !== out && ('dtype' in text || 'torch_dtype' in text)) text['dtype' in text ? 'dtype' : 'torch_dtype'] = dtype;
  }
  return out;
}
