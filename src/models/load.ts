// Building a QwenModel: from a Hugging Face checkpoint directory (each tensor read from
// disk and uploaded on its own, so host memory holds one parameter at a time), or from
// a config with seeded random weights (small models made by this project, benchmarks).

import { openCheckpoint, expectedShapes, exportCheckpoint, type ExportOptions } from './checkpoint.ts';
import type { ModelConfig } from './config.ts';
import { QwenModel, type ParamMap } from './qwen.ts';
import { randn } from '../reference/random.ts';
import { requireGrad } from '../tensor/autograd.ts';
import { keep } from '../tensor/scope.ts';
import { tensor } from '../tensor/tensor.ts';

export interface LoadOptions {
  /** Mark parameters as trainable (default true). */
  trainable?: boolean;
}

export function loadModel(dir: string, opts: LoadOptions = {}): QwenModel {
  const ckpt = openCheckpoint(dir);
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
  return new QwenModel(ckpt.config, params);
}

/**
 * Seeded random weights in the initialisation transformers uses for Qwen
 * (normal(0, 0.02) for matrices, ones for norms, zeros for biases).
 */
export function randomModel(config: ModelConfig, seed = 0, opts: LoadOptions & { std?: number; fast?: boolean } = {}): QwenModel {
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
export async function saveModel(model: QwenModel, dir: string, opts: ExportOptions = {}): Promise<void> {
  const names = [...expectedShapes(model.config).keys()];
  async function* tensors() {
    for (const name of names) {
      const t = model.param(name);
      yield [name, (await t.toArray()) as Float32Array, [...t.shape]] as [string, Float32Array, number[]];
    }
  }
  await exportCheckpoint(dir, model.config, tensors(), opts);
}
