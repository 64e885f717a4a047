// The search-QA environment (Search-R1's format, a BM25 retriever over a generated
// corpus) as the trainer sees it.

import { z } from 'zod';
import { defineEnv } from '../../src/envs/plugin.ts';
import { searchAgent } from './agent.ts';
import { SearchEnvironment } from './env.ts';
import { HttpRetriever } from './http_retriever.ts';

export const searchPlugin = defineEnv({
  name: 'search',
  aliases: [],
  description: 'question answering with a search tool in the Search-R1 format (exact-match reward)',
  options: z.strictObject({
    /** A Search-R1 compatible retrieval endpoint (POST /retrieve) instead of the built-in BM25 over the generated corpus. */
    retrieverUrl: z.url({ protocol: /^https?$/ }).optional(),
    /** How results are shown: Search-R1's `Doc 1(Title: ...)` between blank lines, or verl-agent's `Doc 1: ...`. */
    resultFormat: z.enum(['search-r1', 'verl-agent']).default('search-r1'),
  }),
  create: (o) => new SearchEnvironment({ resultFormat: o.resultFormat, ...(o.retrieverUrl ? { retriever: new HttpRetriever(o.retrieverUrl) } : {}) }),
  agent: searchAgent,
  // Search-R1's recipe validates greedily, once, at the end, and warms the learning rate up over 10% of the run.
  recipe: {
    tasksPerIteration: 128, maxTurns: 4, maxPromptTokens: 4096, klCoef: 0.001, invalidPenalty: 0.01, miniBatchSize: 256,
    validationEvery: 0, validationTasks: 128, validationTemperature: 0, warmupRatio: 0.1,
  },
  reward: { success: 1 },
});
