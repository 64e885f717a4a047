// A tiny random household model (word-level tokenizer over the household text) for
// trainer tests on the software GPU.

import { join } from 'node:path';
import { randomModel, saveModel } from '../../src/models/load.ts';
import { loadTokenizer } from '../../src/tokenizer/tokenizer.ts';
import { buildWordTokenizer, writeTokenizerFiles } from '../../src/tokenizer/word_tokenizer.ts';
import { qwen2Config } from '../../src/sft/default_model.ts';
import { householdCorpus } from '../../envs/household/expert_data.ts';
import { gpu } from './gpu.ts';

export async function tinyHouseholdModel(dir: string): Promise<void> {
  writeTokenizerFiles(dir, buildWordTokenizer(householdCorpus(10)));
  const tokenizer = await loadTokenizer(dir);
  const cfg = qwen2Config({ hidden: 32, layers: 1, heads: 2, kvHeads: 1, intermediate: 64, maxPositions: 2048 }, tokenizer.vocabSize, tokenizer);
  const model = randomModel(cfg, 3);
  await saveModel(model, dir, { tokenizerDir: dir });
  for (const p of model.parameters()) p.dispose();
}

/** A getter that builds the tiny model in `<root>/model` on first use (GPU ready) and hands out its directory after. */
export function lazyTinyHouseholdModel(root: string): () => Promise<string> {
  let made: Promise<string> | null = null;
  return () => (made ??= (async () => {
    await gpu();
    const dir = join(root, 'model');
    await tinyHouseholdModel(dir);
    return dir;
  })());
}
