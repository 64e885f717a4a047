// A tiny random household model (word-level tokenizer over the household text) for
// trainer tests on the software GPU.

import { randomModel, saveModel } from '../../src/models/load.ts';
import { loadTokenizer } from '../../src/models/tokenizer.ts';
import { buildWordTokenizer, writeTokenizerFiles } from '../../src/models/word_tokenizer.ts';
import { qwen2Config } from '../../src/trainer/default_model.ts';
import { householdCorpus } from '../../src/trainer/expert_data.ts';

export async function tinyHouseholdModel(dir: string): Promise<void> {
  writeTokenizerFiles(dir, buildWordTokenizer(householdCorpus(10)));
  const tokenizer = await loadTokenizer(dir);
  const cfg = qwen2Config({ hidden: 32, layers: 1, heads: 2, kvHeads: 1, intermediate: 64, maxPositions: 2048 }, tokenizer.vocabSize, tokenizer);
  const model = randomModel(cfg, 3);
  await saveModel(model, dir, { tokenizerDir: dir });
  for (const p of model.parameters()) p.dispose();
}
