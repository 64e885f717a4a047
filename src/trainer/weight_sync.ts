// Pushing the trained weights to a remote rollout server after every update, without
// NCCL (docs/PROTOCOLS.md section 5, docs/SERVING.md). The server must be able
// to read the run directory, and every version goes to a directory of its own, so a
// server never reads a file while the next version is being written over it:
//   - LoRA: a PEFT adapter per update, loaded under a new name (reloading one name has
//     served stale weights), generated with by that name, the previous one unloaded
//     (vLLM needs --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True);
//   - full fine-tuning: a Hugging Face checkpoint per update, which the server's workers
//     reload in place (vLLM's POST /collective_rpc "reload_weights" with weights_path,
//     enabled by VLLM_SERVER_DEV_MODE=1; our `serve` takes the same request).

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
    return this.lora ? this.current?.name : undefined;
  }

  /** Sends the weights after `iteration` updates. */
  async push(model: CausalLM, iteration: number): Promise<void> {
    const name = `policy-step-${iteration}`;
    const dir = path.resolve(this.dir, name);
    if (this.lora) {
      await saveLora(model, dir);
      await this.server.loadLoraAdapter(name, dir);
    } else {
      await saveModel(model, dir);
      await this.server.reloadWeights(dir);
    }
    const previous = this.current;
    this.current = { name, dir };
    if (!previous) return;
    if (this.lora) await this.server.unloadLoraAdapter(previous.name);
    fs.rmSync(previous.dir, { recursive: true, force: true });
  }
}
