// The rollout both scoring studies read: the bundled model playing household train
// tasks (seeds 100 on), `runs` episodes each, the teacher's skills blocks attached
// (withSkills 'teacher'), as the self-distillation methods' iterations make them.

import { HouseholdEnvironment } from '../envs/household/index.ts';
import { envPlugin } from '../envs/registry.ts';
import type { CausalLM } from '../src/models/causal_lm.ts';
import { loadModel } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';

/** Needs an initialised runtime; returns the model too, for scoring what it played. */
export async function householdRollout(opts: { tasks: number; runs: number; turns: number; trainable?: boolean }): Promise<{ model: CausalLM; samples: StepSample[] }> {
  const dir = new URL('../models/household-tiny', import.meta.url).pathname;
  const tokenizer = await loadTokenizer(dir);
  const model = loadModel(dir, { trainable: opts.trainable ?? false });
  const { samples } = await runRollout({
    env: new HouseholdEnvironment(), spec: envPlugin('household').agent, engine: new LocalEngine(model, { tokenizer }), tokenizer,
    tasks: Array.from({ length: opts.tasks }, (_, i) => ({ split: 'train' as const, seed: 100 + i })),
    groupSize: opts.runs, maxTurns: opts.turns, maxPromptTokens: 1900, maxResponseTokens: 64,
    sampling: { temperature: 1, seed: 3 }, withSkills: 'teacher',
  });
  return { model, samples };
}
