// Where an RL rollout's time goes: household episodes of a model directory (default
// the bundled one) through the local engine, as the trainer's rollout runs them.
// Reports the wall time, the share spent waiting on the engine (the rest is the host:
// environments, prompt rendering, tokenization), the engine's batches and decoding
// steps with the fraction of row-steps that served unfinished rows, the share of chunks
// recorded while the one before ran and the host's time waiting for readbacks, and, on
// adapters with timestamp queries, a second identical rollout's GPU milliseconds per
// kernel.

import { HouseholdEnvironment } from '../../envs/household/index.ts';
import { householdPlugin } from '../../envs/household/plugin.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { loadModel } from '../models/load.ts';
import { loadTokenizer } from '../tokenizer/tokenizer.ts';
import { runRollout } from '../rollout/agent_loop.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { countsPer, gpuCounts } from '../gpu/gpu_counts.ts';
import { kernelTimes, profileRows } from './profile.ts';

export interface RolloutBenchOptions {
  model?: string;
  tasks?: number;
  groupSize?: number;
  maxTurns?: number;
  maxResponseTokens?: number;
}

export async function benchRollout(rt: Runtime, opts: RolloutBenchOptions = {}): Promise<object[]> {
  const dir = opts.model ?? 'models/household-tiny';
  const tasks = opts.tasks ?? 8;
  const groupSize = opts.groupSize ?? 8;
  const maxTurns = opts.maxTurns ?? 30;
  const model = loadModel(dir, { trainable: false });
  const tokenizer = await loadTokenizer(dir);
  const engine = new LocalEngine(model, { tokenizer, path: dir });
  const rollout = (n: number) => runRollout({
    spec: householdPlugin.agent,
    env: new HouseholdEnvironment(), engine, tokenizer, groupSize, maxTurns,
    tasks: Array.from({ length: n }, (_, seed) => ({ split: 'train' as const, seed })),
    maxPromptTokens: 2048, maxResponseTokens: opts.maxResponseTokens ?? 64, sampling: { seed: 1 },
  });
  const rows: object[] = [];
  try {
    await rollout(1);
    const before = { ...engine.usage };
    const counts = gpuCounts(rt);
    const { stats } = await rollout(tasks);
    const perToken = countsPer(rt, counts, stats.tokensGenerated, 'token');
    const u = engine.usage;
    const decodeSteps = u.decodeSteps - before.decodeSteps;
    rows.push({
      kind: 'rollout', model: dir, episodes: tasks * groupSize, max_turns: maxTurns, turns: stats.turns,
      wall_s: +stats.wallSeconds.toFixed(2), engine_s: +stats.generateSeconds.toFixed(2), host_s: +(stats.wallSeconds - stats.generateSeconds).toFixed(2),
      engine_calls: stats.engineCalls, batches: u.batches - before.batches, decode_steps: decodeSteps,
      ms_per_decode_step: +((stats.generateSeconds * 1000) / Math.max(decodeSteps, 1)).toFixed(2),
      live_row_share: +((u.liveRowSteps - before.liveRowSteps) / Math.max(u.rowSteps - before.rowSteps, 1)).toFixed(3),
      // Near 1 with waits near 0: the host's recording is the bound, the GPU kept busy.
      overlapped_chunk_share: +((u.overlappedChunks - before.overlappedChunks) / Math.max(u.chunks - before.chunks, 1)).toFixed(3),
      readback_wait_ms_per_decode_step: +((u.readbackWaitMs - before.readbackWaitMs) / Math.max(decodeSteps, 1)).toFixed(3),
      prompt_tokens: stats.promptTokens, generated_tokens: stats.tokensGenerated,
      // A prompt several rows of a batch ask (an episode group's first turn) is prefilled once.
      prefilled_prompt_share: +((u.prefilledTokens - before.prefilledTokens) / Math.max(u.promptTokens - before.promptTokens, 1)).toFixed(3),
      ...perToken,
    });
    if (rt.caps.timestampQuery) rows.push(...profileRows(`rollout ${dir}`, await kernelTimes(rt, () => rollout(tasks))));
  } finally {
    await engine.close();
    rt.pool.trim();
  }
  return rows;
}
