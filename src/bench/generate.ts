// Decode throughput of the local engine: random prompts of 128 tokens, 128 new
// tokens per sequence sampled at temperature 1 (as torch_reference.py times HF
// generate), through the same LocalEngine the trainer and `serve` use.

import type { Runtime } from '../gpu/runtime.ts';
import { LocalEngine } from '../rollout/local_engine.ts';
import { benchModel, randomIds } from './train_step.ts';

export async function benchGenerate(rt: Runtime, preset: string, batches: number[] = [1, 32]): Promise<object[]> {
  const model = benchModel(preset);
  const engine = new LocalEngine(model, { maxBatch: Math.max(...batches) });
  const rows: object[] = [];
  const params = { maxTokens: 128, temperature: 1, topP: 1, topK: 0, ignoreEos: true };
  for (const B of batches) {
    const requests = Array.from({ length: B }, (_, b) => ({ promptIds: Array.from(randomIds(128, model.config.vocabSize, 1000 + b)), params: { ...params, seed: b } }));
    await engine.generate(requests.map((r) => ({ ...r, params: { ...r.params, maxTokens: 4 } })));
    const t0 = performance.now();
    const d0 = rt.dispatchCount;
    const out = await engine.generate(requests);
    const s = (performance.now() - t0) / 1000;
    const tokens = out.reduce((n, r) => n + r.tokenIds.length, 0);
    // One step per new token, the prefill (the first) included, sampling too.
    const perStep = (rt.dispatchCount - d0) / params.maxTokens;
    rows.push({
      kind: 'generate', preset, batch: B, prompt: 128, new_tokens: 128, decoding: 'sampled, temperature 1', seconds: +s.toFixed(2),
      tokens_per_s: Math.round(tokens / s), dispatches_per_step: +perStep.toFixed(1),
    });
  }
  await engine.close?.();
  for (const p of model.parameters()) p.dispose();
  rt.pool.trim();
  return rows;
}
