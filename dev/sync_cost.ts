// What the trainer's side of a weight sync costs at real model sizes: a random model of
// a published Qwen shape is written as one version, full weights and a LoRA adapter
// (r 16 on the seven projections), the way a run writes each update for its servers
// (src/fleet/weight_versions.ts: read back from the GPU, written as safetensors).
// Prints one JSON line per version with its bytes and seconds. The weights probe a
// version also carries is one forward pass of 32 tokens (the software GPU cannot bind
// a 0.5B embedding, so it is left out here). The servers' side (vLLM's reload_weights,
// load_lora_adapter) is theirs to time; docs/SERVING.md cites vLLM's own measurements.
//
//   bun dev/sync_cost.ts --out /tmp/sync [--presets qwen2.5-0.5b,qwen2.5-1.5b]

import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { initRuntime } from '../src/gpu/runtime.ts';
import { randomModel, saveModel } from '../src/models/load.ts';
import { attachLora, saveLora } from '../src/lora/lora.ts';
import { configFromPreset } from '../src/hf_model/presets.ts';

const { values } = parseArgs({ options: { out: { type: 'string' }, presets: { type: 'string', default: 'qwen2.5-0.5b,qwen2.5-1.5b' } } });
if (!values.out) throw new Error('--out DIR is required');
const out = path.resolve(values.out);

const rt = await initRuntime();
const PROJECTIONS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

for (const preset of values.presets!.split(',')) {
  const config = configFromPreset(preset);
  const model = randomModel(config, 0, { fast: true });
  const parameters = model.parameters().reduce((n, p) => n + p.size, 0);
  for (const lora of [false, true]) {
    if (lora) attachLora(model, { r: 16, alpha: 32, targetModules: PROJECTIONS, baseModel: null }, 0);
    const dir = path.join(out, `${preset}-${lora ? 'lora' : 'full'}`);
    fs.rmSync(dir, { recursive: true, force: true });
    const t0 = performance.now();
    if (lora) await saveLora(model, dir);
    else await saveModel(model, dir);
    const seconds = (performance.now() - t0) / 1000;
    const bytes = fs.readdirSync(dir).reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
    console.log(JSON.stringify({ preset, kind: lora ? 'lora r16' : 'full', parameters, bytes, writeSeconds: +seconds.toFixed(2), gpu: rt.caps.software ? 'software' : 'hardware' }));
    fs.rmSync(dir, { recursive: true, force: true });
  }
  for (const p of model.parameters()) p.dispose();
}
process.exit(0);
