// Published Qwen shapes for random initialisation, as the config.json their Hugging
// Face repositories ship (so export writes what transformers and vLLM already know).

import { parseConfig, type ModelConfig } from './config.ts';
import { ConfigError } from './errors.ts';

const qwen25 = {
  architectures: ['Qwen2ForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151643,
  hidden_act: 'silu',
  initializer_range: 0.02,
  max_position_embeddings: 32768,
  model_type: 'qwen2',
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

const qwen3 = {
  architectures: ['Qwen3ForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: 'silu',
  initializer_range: 0.02,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: 'qwen3',
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

export const PRESETS: Record<string, Record<string, unknown>> = {
  'qwen2.5-0.5b': {
    ...qwen25, hidden_size: 896, intermediate_size: 4864, num_hidden_layers: 24, max_window_layers: 24,
    num_attention_heads: 14, num_key_value_heads: 2, tie_word_embeddings: true,
  },
  'qwen2.5-1.5b': {
    ...qwen25, hidden_size: 1536, intermediate_size: 8960, num_hidden_layers: 28, max_window_layers: 28,
    num_attention_heads: 12, num_key_value_heads: 2, tie_word_embeddings: true,
  },
  'qwen3-0.6b': {
    ...qwen3, hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 28,
    num_attention_heads: 16, num_key_value_heads: 8, tie_word_embeddings: true,
  },
  'qwen3-1.7b': {
    ...qwen3, hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 28,
    num_attention_heads: 16, num_key_value_heads: 8, tie_word_embeddings: true,
  },
};

/**
 * A config for random initialisation: a preset's config.json with `overrides` (HF keys,
 * e.g. `{ num_hidden_layers: 2 }`) applied, parsed like any checkpoint's config.
 */
export function configFromPreset(name: string, overrides: Record<string, unknown> = {}): ModelConfig {
  const preset = PRESETS[name];
  if (!preset) throw new ConfigError(`unknown preset "${name}" (known: ${Object.keys(PRESETS).join(', ')})`);
  return parseConfig({ ...structuredClone(preset), ...overrides }, `preset ${name}`);
}
