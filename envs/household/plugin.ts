// The household environment (ALFWorld's text format) as the trainer sees it.

import type { EnvPlugin } from '../../src/envs/plugin.ts';
import { householdAgent } from './agent.ts';
import { HouseholdEnvironment, HOUSEHOLD_WIN_REWARD } from './env.ts';
import { DEFAULT_DETOUR, householdCorpus, householdExpertSamples } from './expert_data.ts';

export const householdPlugin: EnvPlugin = {
  name: 'household',
  aliases: ['alfworld'],
  description: 'household tasks in the ALFWorld text format (six task types, procedural rooms)',
  create: () => new HouseholdEnvironment(),
  agent: householdAgent,
  recipe: {
    tasksPerIteration: 16, maxTurns: 50, maxPromptTokens: 2048, klCoef: 0.01, invalidPenalty: 0.1, miniBatchSize: 256,
    validationEvery: 5, validationTasks: 32, validationTemperature: 0.4, warmupRatio: 0,
  },
  reward: { success: HOUSEHOLD_WIN_REWARD },
  expert: { defaultDetour: DEFAULT_DETOUR, samples: householdExpertSamples, corpus: householdCorpus },
  // AgentGym's agentenv-alfworld: sessions keyed by "id", the game index as the task.
  agentgym: {
    name: 'alfworld',
    maxSteps: 50,
    idField: 'id',
    resetFields: (o) => ({ game: o.seed, world_type: 'Text' }),
    taskText: (obs) => obs.match(/Your task is to: (.*)/)?.[1]?.trim() ?? '',
  },
};
