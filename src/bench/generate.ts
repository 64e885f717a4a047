// Decode throughput of the local engine: random prompts of 128 tokens, 128 new
// tokens per sequence with the KV cache, as torch_reference.py times HF generate.

import type { Runtime } from '../gpu/runtime.ts';
import { greedyGenerate } from '../models/generate.ts';
import { benchModel, randomIds } from './train_step.ts';

export async function benchGenerate(rt: Runtime, preset: string, batches: number[] = [1, 32]): Promise<object[]> {
  const model = benchModel(preset);
  const rows: object[] = [];
  for (const B of batches) {
    const prompt = randomIds(B * 128, model.config.vocabSize, B);
    await greedyGenerate(model, prompt, 4, { batch: B });
    const t0 = performance.now();
    await greedyGenerate(model, prompt, 128, { batch: B });
    const s = (performance.now() - t0) / 1000;
    rows.push({ kind: 'generate', preset, batch: B, prompt: 128, new_tokens: 128, decoding: 'greedy', seconds: +s.toFixed(2), tokens_per_s: Math.round((B * 128) / s) });
  }
  for (const p of model.parameters()) p.dispose();
  rt.pool.trim();
  return rows;
}
