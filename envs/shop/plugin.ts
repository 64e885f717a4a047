// The shop environment (WebShop's page format) as the trainer sees it.

import { z } from 'zod';
import { isObject, isStringArray } from '../../src/envs/http_json.ts';
import { defineEnv } from '../../src/envs/plugin.ts';
import { shopAgent } from './agent.ts';
import { ShopEnvironment, SHOP_WIN_REWARD } from './env.ts';
import { admissibleActions } from './pages.ts';

/**
 * WebShop's available actions as the shop lists its own: search[...] where the page has
 * a search bar, click[...] on each clickable but the search button, which WebShop
 * lists and refuses (its step ignores click[search]: a search goes through search[...]).
 */
export function webshopActions(available: unknown): string[] {
  if (!isObject(available) || typeof available.has_search_bar !== 'boolean' || !isStringArray(available.clickables)) throw new Error('expected {"has_search_bar": boolean, "clickables": [strings]}');
  return admissibleActions({ observation: '', hasSearchBar: available.has_search_bar === true, clickables: available.clickables.filter((c) => c !== 'search') });
}

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
  // AgentGym's agentenv-webshop: environments keyed by "env_idx", reset to a goal by its
  // index in the server's list (the 6,910 goals of WebShop's 1,000-product set, split
  // as WebShop's own code splits them: test 0-499, validation 500-1499, train the rest).
  agentgym: {
    name: 'webshop',
    server: 'agentenv-webshop',
    maxSteps: 15,
    idField: 'env_idx',
    resetFields: (session_id) => ({ session_id }),
    tasks: { count: 6910, noun: 'goals', train: '1500-6909', validation: '500-1499', test: '0-499' },
    liveness: { path: '/', answer: 'ok' },
    listPath: '/list_envs',
    actions: webshopActions,
    taskText: (obs) => obs.match(/Instruction:\s*(?:\[SEP\])?\s*(.*?)\s*\[SEP\]/)?.[1]?.trim() ?? '',
    // The server's reward is the purchase score in [0, 1]; a score of 1 is a win.
    nativeScore: true,
  },
});
