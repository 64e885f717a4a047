// Pushing the trained weights to a remote rollout server after every update, without
// NCCL (shared design PROTOCOLS.md section 5): with LoRA, a new PEFT adapter version
// per update, loaded under a new name (reloading one name has served stale weights),
// generated with by that name, the previous one unloaded; with full fine-tuning, a
// checkpoint directory and the server's reload endpoint. The server must be able to
// read the run directory (vLLM needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True).

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CausalLM } from '../models/causal_lm.ts';
import { saveModel } from '../models/load.ts';
import { saveLora } from '../models/lora.ts';
import type { WeightSync } from '../rollout/engine.ts';

export class RemoteWeights {
  private current: { name: string; dir: string } | null = null;

  constructor(
    private readonly server: WeightSync,
    private readonly dir: string,
    private readonly lora: boolean,
  ) {}

  /** The model name rollouts must ask for (undefined: the server's base model). */
  get modelName(): string | undefined {
    return this.current?.name;
  }

  /** Sends the weights after `iteration` updates. */
  async push(model: CausalLM, iteration: number): Promise<void> {
    if (!this.lora) {
      const dir = path.resolve(this.dir, 'weights');
      await saveModel(model, dir);
      await this.server.reloadWeights(dir);
      return;
    }
    const name = `policy-step-${iteration}`;
    const dir = path.resolve(this.dir, name);
    await saveLora(model, dir);
    await this.server.loadLoraAdapter(name, dir);
    const previous = this.current;
    this.current = { name, dir };
    if (previous) {
      await this.server.unloadLoraAdapter(previous.name);
      fs.rmSync(previous.dir, { recursive: true, force: true });
    }
  }
}
