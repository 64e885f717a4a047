// The search-QA environment (Search-R1's format, a BM25 retriever over a generated
// corpus) as the trainer sees it.

import type { EnvPlugin } from '../../src/envs/plugin.ts';
import { searchAgent } from './agent.ts';
import { SearchEnvironment } from './env.ts';

export const searchPlugin: EnvPlugin = {
  name: 'search',
  aliases: [],
  description: 'question answering with a search tool in the Search-R1 format (exact-match reward)',
  create: () => new SearchEnvironment(),
  agent: searchAgent,
  // Search-R1's recipe validates greedily, once, at the end, and warms the learning rate up over 10% of the run.
  recipe: {
    tasksPerIteration: 128, maxTurns: 4, maxPromptTokens: 4096, klCoef: 0.001, invalidPenalty: 0.01, miniBatchSize: 256,
    validationEvery: 0, validationTasks: 128, validationTemperature: 0, warmupRatio: 0.1,
  },
  reward: { success: 1 },
};
