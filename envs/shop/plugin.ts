// The shop environment (WebShop's page format) as the trainer sees it.

import type { EnvPlugin } from '../../src/envs/plugin.ts';
import { shopAgent } from './agent.ts';
import { ShopEnvironment, SHOP_WIN_REWARD } from './env.ts';

export const shopPlugin: EnvPlugin = {
  name: 'shop',
  aliases: ['webshop'],
  description: 'shopping in the WebShop page format (search, click through results and options, buy)',
  create: () => new ShopEnvironment(),
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
  },
};
