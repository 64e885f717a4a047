// The models one engine serves: a base model and LoRA adapters by name, plus a
// full-weight reload. Each adapter is a model of the base model's class over its
// parameter map (shared tensors, not copies) with its branches attached, so a request batch
// picks a model by name and never touches another's state; adapters cost only their
// A/B matrices. A reload swaps the tensors inside that shared map, so every adapter
// sees the new base weights.

import { expectedShapes } from '../hf_model/checkpoint.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { loadCausalLM } from '../models/load.ts';
import { loadLora } from '../lora/lora.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { requireGrad } from '../tensor/autograd.ts';
import { EngineRequestError } from './errors.ts';

export interface ServedModel {
  id: string;
  /** The base model's name for adapters; null for the base. */
  parent: string | null;
  /** Where the weights were loaded from, when known. */
  path: string | null;
}

// Config fields that must not change under a reload (everything the forward pass reads).
function configDifferences(a: ModelConfig, b: ModelConfig): string[] {
  const skip = new Set(['raw', 'torchDtype', 'bosTokenId', 'eosTokenIds', 'padTokenId']);
  const diff: string[] = [];
  for (const key of Object.keys(a) as (keyof ModelConfig)[]) {
    if (!skip.has(key) && JSON.stringify(a[key]) !== JSON.stringify(b[key])) diff.push(`${key} ${JSON.stringify(a[key])} -> ${JSON.stringify(b[key])}`);
  }
  return diff;
}

export class ServedModels {
  private readonly adapters = new Map<string, { model: CausalLM; path: string }>();

  constructor(
    readonly base: CausalLM,
    readonly baseName: string,
    private basePath: string | null = null,
  ) {}

  get config(): ModelConfig {
    return this.base.config;
  }

  /** The model for a request's "model" field: the base (by name or when absent) or an adapter. */
  resolve(name?: string): CausalLM {
    if (name === undefined || name === this.baseName) return this.base;
    const a = this.adapters.get(name);
    if (!a) {
      const known = [this.baseName, ...this.adapters.keys()].map((n) => JSON.stringify(n)).join(', ');
      throw new EngineRequestError(`the model "${name}" does not exist (serving ${known})`, 'not_found');
    }
    return a.model;
  }

  list(): ServedModel[] {
    return [
      { id: this.baseName, parent: null, path: this.basePath },
      ...[...this.adapters].map(([id, a]) => ({ id, parent: this.baseName, path: a.path })),
    ];
  }

  /** Loads the PEFT adapter in `dir` under a new name. */
  loadAdapter(name: string, dir: string): void {
    if (name === this.baseName || this.adapters.has(name)) {
      throw new EngineRequestError(`the LoRA adapter "${name}" has already been loaded; use a new name for every version`);
    }
    // Both model classes are built from (config, params); the sibling shares the map.
    const Model = this.base.constructor as new (config: ModelConfig, params: CausalLM['params']) => CausalLM;
    const model = new Model(this.base.config, this.base.params);
    // Attaching freezes the parameters it sees, and these are the base model's: keep their flags.
    const flags = this.base.parameters().map((p) => [p, p.requiresGrad] as const);
    try {
      loadLora(model, dir);
    } finally {
      for (const [p, on] of flags) requireGrad(p, on);
    }
    for (const l of model.lora.values()) {
      requireGrad(l.a, false);
      requireGrad(l.b, false);
    }
    this.adapters.set(name, { model, path: dir });
  }

  unloadAdapter(name: string): void {
    const a = this.adapters.get(name);
    if (!a) throw new EngineRequestError(`the LoRA adapter "${name}" cannot be found`, 'not_found');
    this.adapters.delete(name);
    for (const l of a.model.lora.values()) {
      l.a.dispose();
      l.b.dispose();
    }
  }

  /**
   * Replaces the base weights with the checkpoint in `dir`. Everything is read and
   * checked before anything changes; then the tensors are swapped in the shared
   * parameter map and the old ones disposed.
   */
  reloadWeights(dir: string): void {
    const fresh = loadCausalLM(dir, { trainable: false });
    const diff = configDifferences(this.base.config, fresh.config);
    const names = [...expectedShapes(this.base.config).keys()];
    if (diff.length || names.some((n) => !fresh.params.has(n))) {
      for (const t of fresh.params.values()) t.dispose();
      throw new EngineRequestError(`${dir}: the checkpoint does not match the served model (${diff.join('; ') || 'different parameters'})`);
    }
    for (const name of names) {
      const old = this.base.params.get(name);
      const t = fresh.params.get(name)!;
      requireGrad(t, old?.requiresGrad ?? false);
      this.base.params.set(name, t);
      old?.dispose();
    }
    this.basePath = dir;
  }

  /** Disposes the adapters (the base model belongs to whoever made it). */
  dispose(): void {
    for (const name of [...this.adapters.keys()]) this.unloadAdapter(name);
  }
}
