// The search-QA environment (Search-R1's format) as the trainer sees it: its settings
// (options.ts), the environment they make, and the turn contract they choose.

import { defineEnv } from '../../src/envs/plugin.ts';
import { searchAgent } from './agent.ts';
import { longestSearchStep, missingQuestionFile, parsingOf, resolveSearchOptions, searchEnvironmentFrom, searchOptions } from './options.ts';

export const searchPlugin = defineEnv({
  name: 'search',
  aliases: [],
  description: 'question answering with a search tool in the Search-R1 format (exact-match reward)',
  options: searchOptions,
  create: searchEnvironmentFrom,
  agent: searchAgent('search-r1'),
  agentFor: (o) => searchAgent(parsingOf(o)),
  resolveOptions: resolveSearchOptions,
  longestStep: longestSearchStep,
  unplayable: missingQuestionFile,
  // SDAR's search launchers (128 x 8, 4 turns) validate greedily, once, at the end, and warm the learning rate up over 10% of the run; Search-R1's own are in docs/SEARCH_R1.md.
  recipe: {
    tasksPerIteration: 128, maxTurns: 4, maxPromptTokens: 4096, klCoef: 0.001, invalidPenalty: 0.01, miniBatchSize: 256,
    validationEvery: 0, validationTasks: 128, validationTemperature: 0, warmupRatio: 0.1,
  },
  reward: { success: 1 },
});
