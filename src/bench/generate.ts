// Decode throughput of the local engine: random prompts of 128 tokens, 128 new
// tokens per sequence sampled at temperature 1 (as torch_reference.py times HF
// generate), through the same LocalEngine the trainer and `serve` use. The median of
// three timed runs: a single run at batch 1 swung between 113 and 185 tokens/s from one
// build to the next on the H200 (a host-bound second or so), so each run's figure is reported too.

import type { Runtime } from '../gpu/runtime.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { countsPer, gpuCounts, type GpuCounts } from '../gpu/gpu_counts.ts';
import { benchModel, randomIds } from './train_step.ts';

export interface GenerateBenchOptions {
  batches?: number[];
  newTokens?: number;
  runs?: number;
}

export async function benchGenerate(rt: Runtime, preset: string, opts: GenerateBenchOptions = {}): Promise<object[]> {
  const { batches = [1, 32], newTokens = 128, runs = 3 } = opts;
  const model = benchModel(preset);
  const engine = new LocalEngine(model, { maxBatch: Math.max(...batches) });
  const rows: object[] = [];
  const params = { maxTokens: newTokens, temperature: 1, topP: 1, topK: 0, ignoreEos: true };
  for (const B of batches) {
    const requests = Array.from({ length: B }, (_, b) => ({ promptIds: Array.from(randomIds(128, model.config.vocabSize, 1000 + b)), params: { ...params, seed: b } }));
    await engine.generate(requests.map((r) => ({ ...r, params: { ...r.params, maxTokens: 4 } })));
    const seconds: number[] = [];
    let tokens = 0;
    let counts: Record<string, number> = {};
    for (let run = 0; run < runs; run++) {
      const t0 = performance.now();
      const before: GpuCounts = gpuCounts(rt);
      const out = await engine.generate(requests);
      seconds.push((performance.now() - t0) / 1000);
      tokens = out.reduce((n, r) => n + r.tokenIds.length, 0);
      // Per step of the batch (a token of every row), the prefill's included.
      counts = countsPer(rt, before, tokens / B, 'step');
    }
    const s = [...seconds].sort((a, b) => a - b)[Math.floor(runs / 2)];
    rows.push({
      kind: 'generate', preset, batch: B, prompt: 128, new_tokens: newTokens, decoding: 'sampled, temperature 1', seconds: +s.toFixed(3),
      tokens_per_s: Math.round(tokens / s), tokens_per_s_runs: seconds.map((x) => Math.round(tokens / x)),
      ...counts,
    });
  }
  await engine.close?.();
  for (const p of model.parameters()) p.dispose();
  rt.pool.trim();
  return rows;
}
