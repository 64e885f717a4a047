// The trained weights as versions a server can load, without NCCL (docs/SERVING.md):
// every version in a directory of its own under the run's sync/ folder (so a server
// never reads a file while the next version is written over it), which the servers
// must be able to read (the same machine or a shared filesystem):
//   - LoRA: a PEFT adapter per version, loaded under a name of its own (reloading one
//     name has served stale weights), "policy-<run tag>-step-<n>"; the tag keeps two
//     runs' adapters apart on one server, and is the same when a run resumes;
//   - full fine-tuning: a Hugging Face checkpoint per version, which the servers reload
//     in place.
// Each version also carries the trainer's log-probs of the weights probe, which a
// server holding it reproduces.

import * as path from '../storage/paths.ts';
import { storage } from '../storage/storage.ts';
import { sha256Hex } from '../util/sha256.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { saveModel } from '../models/load.ts';
import { saveLora } from '../lora/lora.ts';
import { trainerProbe } from './weight_probe.ts';

export interface WeightVersion {
  /** Updates the weights have had. */
  step: number;
  /** The adapter's name with LoRA; with full weights the name is the server's own. */
  name: string;
  dir: string;
  lora: boolean;
  /** The trainer's log-probs of the probe's tokens 1..n-1 under these weights. */
  probe: number[];
  /** Seconds spent writing it to disk. */
  saveSeconds: number;
  /** Bytes written. */
  bytes: number;
}

function dirBytes(dir: string): number {
  let n = 0;
  for (const name of storage().list(dir)) {
    const stat = storage().stat(path.join(dir, name))!;
    n += stat.isDirectory ? dirBytes(path.join(dir, name)) : stat.size;
  }
  return n;
}

/** A run's tag in adapter names: short, the same for every invocation of the run. */
export function runTag(runDir: string): string {
  return sha256Hex(path.resolve(runDir)).slice(0, 8);
}

export class WeightVersions {
  private latest: WeightVersion | null = null;
  private readonly inUse = new Map<string, WeightVersion>();

  constructor(
    /** The run's sync/ folder. */
    readonly dir: string,
    readonly lora: boolean,
    readonly tag: string,
    private readonly probeIds: readonly number[],
  ) {}

  get current(): WeightVersion | null {
    return this.latest;
  }

  /** The adapter names of this run (any step): what a server may hold of ours from an earlier invocation. */
  isOurs(name: string): boolean {
    return name.startsWith(`policy-${this.tag}-step-`);
  }

  /** Writes the model's weights after `step` updates as the current version. */
  async publish(model: CausalLM, step: number): Promise<WeightVersion> {
    const name = this.lora ? `policy-${this.tag}-step-${step}` : `policy-step-${step}`;
    const dir = path.resolve(this.dir, name);
    const t0 = performance.now();
    storage().remove(dir);
    if (this.lora) await saveLora(model, dir);
    else await saveModel(model, dir);
    const saveSeconds = (performance.now() - t0) / 1000;
    const probe = await trainerProbe(model, this.probeIds);
    const previous = this.latest;
    this.latest = { step, name, dir, lora: this.lora, probe, saveSeconds, bytes: dirBytes(dir) };
    if (previous) this.release(previous);
    return this.latest;
  }

  /** A server started using `v`: its files stay until no server does. */
  hold(server: string, v: WeightVersion): void {
    const before = this.inUse.get(server);
    this.inUse.set(server, v);
    if (before && before !== v) this.release(before);
  }

  /** Removes a version's files once it is neither current nor held by a server. */
  private release(v: WeightVersion): void {
    if (v === this.latest || [...this.inUse.values()].includes(v)) return;
    storage().remove(v.dir);
  }
}
