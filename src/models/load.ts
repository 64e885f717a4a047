// Building a QwenModel: from a Hugging Face checkpoint directory (each tensor read from
// disk and uploaded on its own, so host memory holds one parameter at a time), or from
// a config with seeded random weights (small models made by this project, benchmarks).

import type { CausalLM, ParamMap } from './causal_lm.ts';
import { openCheckpoint, expectedShapes, exportCheckpoint, type Checkpoint, type ExportOptions } from '../hf_model/checkpoint.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { ConfigError } from '../hf_model/errors.ts';
import { QwenModel } from './qwen.ts';
import { Qwen35Model } from './qwen35.ts';
import { SafetensorsReader } from '../safetensors/reader.ts';
import { randn } from '../util/random.ts';
import { requireGrad } from '../tensor/autograd.ts';
import { keep } from '../tensor/scope.ts';
import { tensor } from '../tensor/tensor.ts';

export interface LoadOptions {
  /** Mark parameters as trainable (default true). */
  trainable?: boolean;
}

function readParams(ckpt: Checkpoint, opts: LoadOptions): ParamMap {
  const params: ParamMap = new Map();
  try {
    for (const [name, data, shape] of ckpt.tensors()) {
      const t = keep(tensor(data, shape));
      t.name = name;
      params.set(name, requireGrad(t, opts.trainable ?? true));
    }
  } catch (e) {
    for (const t of params.values()) t.dispose();
    throw e;
  } finally {
    ckpt.close();
  }
  return params;
}

/** A Qwen2/Qwen3 checkpoint directory as a QwenModel (Qwen3.5 goes through loadCausalLM). */
export function loadModel(dir: string, opts: LoadOptions = {}): QwenModel {
  const ckpt = openCheckpoint(dir);
  if (ckpt.config.family === 'qwen3_5') {
    ckpt.close();
    throw new ConfigError(`${dir}: ${ckpt.config.architecture} is Qwen3.5's hybrid model; load it with loadCausalLM`);
  }
  return new QwenModel(ckpt.config, readParams(ckpt, opts));
}

/** Any supported checkpoint directory; Qwen3.5's lists in `skipped` what it left out (MTP heads, the vision tower). */
export function loadCausalLM(dir: string, opts: LoadOptions = {}): CausalLM {
  const ckpt = openCheckpoint(dir);
  if (ckpt.config.family !== 'qwen3_5') return new QwenModel(ckpt.config, readParams(ckpt, opts));
  const model = new Qwen35Model(ckpt.config, readParams(ckpt, opts));
  model.skipped = unusedTensors(dir, ckpt.config);
  return model;
}

function unusedTensors(dir: string, cfg: ModelConfig): string[] {
  const reader = SafetensorsReader.open(dir);
  const used = expectedShapes(cfg);
  const unused = reader.names().filter((n) => !used.has(n));
  reader.close();
  const groups: [string, (n: string) => boolean][] = [
    ['multi-token-prediction head (mtp.*)', (n) => n.startsWith('mtp.')],
    ['vision tower (model.visual.*)', (n) => n.startsWith('model.visual.')],
    ['other stored tensors transformers ignores', () => true],
  ];
  const out: string[] = [];
  let rest = unused;
  for (const [what, match] of groups) {
    const hit = rest.filter(match);
    rest = rest.filter((n) => !match(n));
    if (hit.length) out.push(`${what}: ${hit.length} tensors`);
  }
  return out;
}

/**
 * Seeded random weights in the initialisation transformers uses for Qwen
 * (normal(0, 0.02) for matrices, ones for norms, zeros for biases).
 */
export function randomModel(config: ModelConfig, seed = 0, opts: LoadOptions & { std?: number; fast?: boolean } = {}): QwenModel {
  if (config.family === 'qwen3_5') throw new ConfigError('randomModel: Qwen3.5 is not supported (zero-centred norms and linear-attention parameters need their own initialisation)');
  const params: ParamMap = new Map();
  let k = 0;
  // `fast` tiles one block of normal samples over each matrix: statistically the same
  // scale, far quicker for the 0.5B benchmark shapes, useless for training.
  const block = opts.fast ? randn(1 << 20, seed, opts.std ?? 0.02) : null;
  const normal = (n: number, s: number) => {
    if (!block) return randn(n, s, opts.std ?? 0.02);
    const out = new Float32Array(n);
    for (let at = 0; at < n; at += block.length) out.set(block.subarray(0, Math.min(block.length, n - at)), at);
    return out;
  };
  for (const [name, shape] of expectedShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = name.endsWith('norm.weight') ? new Float32Array(n).fill(1) : name.endsWith('.bias') ? new Float32Array(n) : normal(n, seed * 1000003 + k);
    k++;
    const t = keep(tensor(data, shape));
    t.name = name;
    params.set(name, requireGrad(t, opts.trainable ?? true));
  }
  return new QwenModel(config, params);
}

/** Writes the model as a Hugging Face checkpoint directory (config, safetensors, tokenizer files). */
export async function saveModel(model: CausalLM, dir: string, opts: ExportOptions = {}): Promise<void> {
  const names = [...expectedShapes(model.config).keys()];
  async function* tensors() {
    for (const name of names) {
      const t = model.param(name);
      yield [name, (await t.toArray()) as Float32Array, [...t.shape]] as [string, Float32Array, number[]];
    }
  }
  await exportCheckpoint(dir, model.config, tensors(), opts);
}
