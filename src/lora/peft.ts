// LoRA adapters in PEFT's on-disk format, which vLLM's /v1/load_lora_adapter and
// transformers' PeftModel read: adapter_config.json + adapter_model.safetensors with
// tensors base_model.model.<module>.lora_A.weight [r, in] and .lora_B.weight [out, r],
// where <module> is the HF module path (model.layers.3.self_attn.q_proj). The update
// to that module's weight is (alpha / r) * B @ A (alpha / sqrt(r) with rsLoRA).

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { replaceDirAtomic, writeFileAtomic } from '../util/atomic_file.ts';
import { expectedShapes, hfJson, readJson } from '../hf_model/checkpoint.ts';
import type { LoraConfig } from '../models/causal_lm.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { CheckpointError } from '../hf_model/errors.ts';
import { SafetensorsReader } from '../safetensors/reader.ts';
import { writeSafetensors, type StorageDType } from '../safetensors/writer.ts';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';

export interface LoraTarget {
  /** HF module path, e.g. model.layers.0.self_attn.q_proj. */
  module: string;
  inFeatures: number;
  outFeatures: number;
}

/** A[r, in] and B[out, r], row-major. */
export interface LoraWeights {
  a: Float32Array;
  b: Float32Array;
}

export function loraScale(lora: LoraConfig): number {
  return lora.useRslora ? lora.alpha / Math.sqrt(lora.r) : lora.alpha / lora.r;
}

export function peftTensorName(module: string, which: 'A' | 'B'): string {
  return `base_model.model.${module}.lora_${which}.weight`;
}

const PEFT_NAME = /^base_model\.model\.(.+)\.lora_([AB])\.weight$/;

/** The linear layers of `cfg` that `targetModules` selects (PEFT's rule: the module path ends with the target). */
export function loraTargets(cfg: ModelConfig, targetModules: readonly string[]): LoraTarget[] {
  const out: LoraTarget[] = [];
  for (const [name, shape] of expectedShapes(cfg)) {
    if (!name.endsWith('.weight') || shape.length !== 2) continue;
    const module = name.slice(0, -'.weight'.length);
    if (targetModules.some((t) => module === t || module.endsWith(`.${t}`))) out.push({ module, outFeatures: shape[0], inFeatures: shape[1] });
  }
  return out;
}

function checkLora(lora: LoraConfig, where: string): void {
  if (!Number.isInteger(lora.r) || lora.r <= 0) throw new CheckpointError(`${where}: r must be a positive integer, got ${lora.r}`);
  if (!Number.isFinite(lora.alpha)) throw new CheckpointError(`${where}: lora_alpha must be a number, got ${lora.alpha}`);
  if (lora.targetModules.length === 0) throw new CheckpointError(`${where}: target_modules is empty`);
}

function adapterConfigJson(lora: LoraConfig): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: lora.baseModel,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layer_replication: null,
    layers_pattern: null,
    layers_to_transform: null,
    loftq_config: {},
    lora_alpha: lora.alpha,
    lora_dropout: 0.0,
    megatron_config: null,
    megatron_core: 'megatron.core',
    modules_to_save: null,
    peft_type: 'LORA',
    r: lora.r,
    rank_pattern: {},
    revision: null,
    target_modules: [...lora.targetModules].sort(),
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: lora.useRslora ?? false,
  };
}

/**
 * Writes an adapter for every module loraTargets(cfg, lora.targetModules) selects;
 * `weights` maps each module path to its A and B. Replaces `dir` atomically.
 */
export async function writePeftAdapter(
  dir: string, cfg: ModelConfig, lora: LoraConfig, weights: ReadonlyMap<string, LoraWeights>, opts: { dtype?: StorageDType } = {},
): Promise<void> {
  checkLora(lora, 'writePeftAdapter');
  const targets = loraTargets(cfg, lora.targetModules);
  if (targets.length === 0) throw new CheckpointError(`writePeftAdapter: target_modules ${JSON.stringify(lora.targetModules)} select no linear layer of the model`);
  const known = new Set(targets.map((t) => t.module));
  for (const module of weights.keys()) {
    if (!known.has(module)) throw new CheckpointError(`writePeftAdapter: "${module}" is not a module selected by target_modules`);
  }
  const entries: [string, Float32Array, number[]][] = [];
  for (const t of targets) {
    const w = weights.get(t.module);
    if (!w) throw new CheckpointError(`writePeftAdapter: no weights for "${t.module}"`);
    const a = [lora.r, t.inFeatures];
    const b = [t.outFeatures, lora.r];
    if (w.a.length !== a[0] * a[1]) throw new CheckpointError(`writePeftAdapter: "${t.module}" lora_A has ${w.a.length} values, expected [${a.join(', ')}]`);
    if (w.b.length !== b[0] * b[1]) throw new CheckpointError(`writePeftAdapter: "${t.module}" lora_B has ${w.b.length} values, expected [${b.join(', ')}]`);
    entries.push([peftTensorName(t.module, 'A'), w.a, a], [peftTensorName(t.module, 'B'), w.b, b]);
  }
  await replaceDirAtomic(dir, (tmp) => {
    writeSafetensors(path.join(tmp, ADAPTER_WEIGHTS), entries, { dtype: opts.dtype, shardBytes: Infinity });
    writeFileAtomic(path.join(tmp, ADAPTER_CONFIG), hfJson(adapterConfigJson(lora)));
  });
}

export interface PeftAdapter {
  config: LoraConfig;
  /** adapter_config.json as read. */
  raw: Record<string, unknown>;
  /** By module path. */
  weights: Map<string, LoraWeights>;
}

function parseAdapterConfig(raw: Record<string, unknown>, where: string): LoraConfig {
  const refuse = (field: string, why: string): never => {
    throw new CheckpointError(`${where}: ${field} ${why}`);
  };
  if (raw.peft_type !== 'LORA') refuse('peft_type', `is ${JSON.stringify(raw.peft_type)}; only LORA is supported`);
  if (raw.bias !== undefined && raw.bias !== 'none') refuse('bias', `is ${JSON.stringify(raw.bias)}; only "none" is supported`);
  if (raw.use_dora === true) refuse('use_dora', 'is true; DoRA is not supported');
  if (raw.fan_in_fan_out === true) refuse('fan_in_fan_out', 'is true; only nn.Linear layouts are supported');
  for (const field of ['rank_pattern', 'alpha_pattern']) {
    const v = raw[field];
    if (v != null && (typeof v !== 'object' || Object.keys(v).length > 0)) refuse(field, 'is not empty; per-module ranks are not supported');
  }
  for (const field of ['layers_to_transform', 'modules_to_save', 'layer_replication']) {
    const v = raw[field];
    if (v != null && !(Array.isArray(v) && v.length === 0)) refuse(field, `is ${JSON.stringify(v)}; not supported`);
  }
  const targets = raw.target_modules;
  if (!Array.isArray(targets) || !targets.every((t) => typeof t === 'string')) {
    refuse('target_modules', `must be a list of module names, got ${JSON.stringify(targets)}`);
  }
  const lora: LoraConfig = {
    r: raw.r as number,
    alpha: raw.lora_alpha as number,
    targetModules: targets as string[],
    baseModel: typeof raw.base_model_name_or_path === 'string' ? raw.base_model_name_or_path : null,
    useRslora: raw.use_rslora === true,
  };
  checkLora(lora, where);
  return lora;
}

/**
 * Reads an adapter directory. Every tensor must be a lora_A/lora_B pair of one module;
 * with `cfg`, the modules must be exactly those target_modules selects in that model,
 * with A [r, in] and B [out, r].
 */
export function readPeftAdapter(dir: string, cfg?: ModelConfig): PeftAdapter {
  const configPath = path.join(dir, ADAPTER_CONFIG);
  if (!storage().exists(configPath)) throw new CheckpointError(`${dir}: ${ADAPTER_CONFIG} not found`);
  const raw = readJson(configPath);
  const lora = parseAdapterConfig(raw, configPath);
  const reader = SafetensorsReader.open(path.join(dir, ADAPTER_WEIGHTS));
  try {
    const found = new Map<string, { A?: string; B?: string }>();
    for (const name of reader.names()) {
      const m = PEFT_NAME.exec(name);
      if (!m) throw new CheckpointError(`${ADAPTER_WEIGHTS}: tensor "${name}" is not a PEFT LoRA weight (base_model.model.<module>.lora_A|B.weight)`);
      const entry = found.get(m[1]) ?? {};
      entry[m[2] as 'A' | 'B'] = name;
      found.set(m[1], entry);
    }
    const expected = cfg ? new Map(loraTargets(cfg, lora.targetModules).map((t) => [t.module, t])) : null;
    if (expected) {
      for (const module of expected.keys()) {
        if (!found.has(module)) throw new CheckpointError(`${ADAPTER_WEIGHTS}: no LoRA weights for "${module}" (selected by target_modules)`);
      }
    }
    const weights = new Map<string, LoraWeights>();
    for (const [module, { A, B }] of found) {
      if (!A || !B) throw new CheckpointError(`${ADAPTER_WEIGHTS}: "${module}" has lora_${A ? 'A' : 'B'} but no lora_${A ? 'B' : 'A'}`);
      const target = expected?.get(module);
      if (expected && !target) throw new CheckpointError(`${ADAPTER_WEIGHTS}: tensor "${A}" adapts "${module}", which target_modules does not select in this model`);
      const [aShape, bShape] = [reader.info(A).shape, reader.info(B).shape];
      const wantA = [lora.r, target?.inFeatures ?? aShape[1]];
      const wantB = [target?.outFeatures ?? bShape[0], lora.r];
      const same = (s: number[], w: number[]) => s.length === 2 && s[0] === w[0] && s[1] === w[1];
      if (!same(aShape, wantA)) throw new CheckpointError(`${ADAPTER_WEIGHTS}: tensor "${A}" has shape [${aShape.join(', ')}], expected [${wantA.join(', ')}]`);
      if (!same(bShape, wantB)) throw new CheckpointError(`${ADAPTER_WEIGHTS}: tensor "${B}" has shape [${bShape.join(', ')}], expected [${wantB.join(', ')}]`);
      weights.set(module, { a: reader.readFloat32(A), b: reader.readFloat32(B) });
    }
    return { config: lora, raw, weights };
  } finally {
    reader.close();
  }
}
