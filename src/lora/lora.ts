// LoRA on a CausalLM: attach trainable A/B branches to any subset of the linear
// layers (the base weights freeze), save them as a PEFT adapter, load one, or merge
// the branches into the base weights (W += scaling * B @ A).

import type { CausalLM, LoraConfig } from '../models/causal_lm.ts';
import type { StorageDType } from '../safetensors/writer.ts';
import { loraScale, loraTargets, readPeftAdapter, writePeftAdapter, type LoraWeights } from './peft.ts';
import { uniform } from '../util/random.ts';
import { noGrad, requireGrad } from '../tensor/autograd.ts';
import { axpyInPlace, matmul } from '../tensor/ops/index.ts';
import { keep, scope } from '../tensor/scope.ts';
import { tensor, zeros, type Tensor } from '../tensor/tensor.ts';
import { ShapeError } from '../tensor/errors.ts';

export const DEFAULT_LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

function install(model: CausalLM, config: LoraConfig, make: (module: string, inF: number, outF: number) => { a: Tensor; b: Tensor }): void {
  if (model.lora.size) throw new ShapeError('LoRA is already attached to this model; merge or detach it first');
  const targets = loraTargets(model.config, config.targetModules);
  if (!targets.length) throw new ShapeError(`LoRA target_modules ${JSON.stringify(config.targetModules)} match no linear layer of ${model.config.architecture}`);
  for (const p of model.parameters()) requireGrad(p, false);
  const scaling = loraScale(config);
  for (const t of targets) {
    const { a, b } = make(t.module, t.inFeatures, t.outFeatures);
    a.name = `${t.module}.lora_A.weight`;
    b.name = `${t.module}.lora_B.weight`;
    model.lora.set(`${t.module}.weight`, { a: requireGrad(keep(a)), b: requireGrad(keep(b)), scaling });
  }
  model.loraConfig = config;
}

/**
 * Fresh adapters as PEFT initialises them: A uniform in ±1/sqrt(in) (kaiming-uniform
 * with a = sqrt(5)), B zero, so the model's output is unchanged until training.
 */
export function attachLora(model: CausalLM, config: LoraConfig, seed = 0): void {
  let k = 0;
  install(model, config, (_module, inF, outF) => {
    const bound = 1 / Math.sqrt(inF);
    return { a: tensor(uniform(config.r * inF, seed * 7919 + k++, -bound, bound), [config.r, inF]), b: zeros([outF, config.r]) };
  });
}

/** Attaches the adapter saved in a PEFT directory. */
export function loadLora(model: CausalLM, dir: string): void {
  const adapter = readPeftAdapter(dir, model.config);
  install(model, adapter.config, (module, inF, outF) => {
    const w = adapter.weights.get(module)!;
    return { a: tensor(w.a, [adapter.config.r, inF]), b: tensor(w.b, [outF, adapter.config.r]) };
  });
}

export function loraParameters(model: CausalLM): Tensor[] {
  return [...model.lora.values()].flatMap((l) => [l.a, l.b]);
}

export async function saveLora(model: CausalLM, dir: string, opts: { dtype?: StorageDType } = {}): Promise<void> {
  const config = model.loraConfig;
  if (!config) throw new ShapeError('saveLora: the model has no LoRA adapter attached');
  const weights = new Map<string, LoraWeights>();
  for (const [weightName, l] of model.lora) {
    weights.set(weightName.slice(0, -'.weight'.length), { a: (await l.a.toArray()) as Float32Array, b: (await l.b.toArray()) as Float32Array });
  }
  await writePeftAdapter(dir, model.config, config, weights, opts);
}

/** Folds every branch into its base weight and removes the adapters. */
export function mergeLora(model: CausalLM): void {
  noGrad(() => {
    for (const [weightName, l] of model.lora) {
      scope(() => axpyInPlace(model.param(weightName), matmul(l.b, l.a), l.scaling));
      l.a.dispose();
      l.b.dispose();
    }
  });
  model.lora.clear();
  model.loraConfig = null;
}
