// The shop environment (WebShop's page format) as the trainer sees it.

import { z } from 'zod';
import { defineEnv } from '../../src/envs/plugin.ts';
import { shopAgent } from './agent.ts';
import { ShopEnvironment, SHOP_WIN_REWARD } from './env.ts';

export const shopPlugin = defineEnv({
  name: 'shop',
  aliases: ['webshop'],
  description: 'shopping in the WebShop page format (search, click through results and options, buy)',
  options: z.strictObject({
    /** Start every page with WebShop's "Instruction: [SEP] <task> [SEP]" header, as WebShop's own pages do (the prompt carries the task either way). */
    instructionHeader: z.boolean().default(false),
  }),
  create: (o) => new ShopEnvironment(o),
  agent: shopAgent,
  recipe: {
    tasksPerIteration: 16, maxTurns: 15, maxPromptTokens: 4096, klCoef: 0.01, invalidPenalty: 0.1, miniBatchSize: 64,
    validationEvery: 5, validationTasks: 32, validationTemperature: 0.4, warmupRatio: 0,
  },
  reward: { success: SHOP_WIN_REWARD },
  // AgentGym's agentenv-webshop: sessions keyed by "env_idx", the session id as the task.
  agentgym: {
    name: 'webshop',
    maxSteps: 15,
    idField: 'env_idx',
    resetFields: (o) => ({ session_id: o.seed }),
    taskText: (obs) => obs.match(/Instruction:\s*(?:\[SEP\])?\s*(.*?)\s*\[SEP\]/)?.[1]?.trim() ?? '',
    // The server's reward is the purchase score in [0, 1]; a score of 1 is a win.
    nativeScore: true,
  },
});
