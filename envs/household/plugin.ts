// The household environment (ALFWorld's text format) as the trainer sees it.

import { z } from 'zod';
import { defineEnv } from '../../src/envs/plugin.ts';
import { householdAgent } from './agent.ts';
import type { TaskType } from './catalog.ts';
import { translateAction } from './dialect.ts';
import { HouseholdEnvironment, HOUSEHOLD_WIN_REWARD } from './env.ts';
import { DEFAULT_DETOUR, householdCorpus, householdExpertSamples } from './expert_data.ts';

/** ALFWorld's task-type names, as its game paths carry them, to ours. */
const ALFWORLD_TASK_TYPES: Readonly<Record<string, TaskType>> = {
  pick_and_place_simple: 'pick_and_place',
  pick_two_obj_and_place: 'pick_two_obj_and_place',
  look_at_obj_in_light: 'look_at_obj_in_light',
  pick_heat_then_place_in_recep: 'pick_heat_then_place',
  pick_cool_then_place_in_recep: 'pick_cool_then_place',
  pick_clean_then_place_in_recep: 'pick_clean_then_place',
};

/** Our task type from an ALFWorld label (a game path such as ".../pick_heat_then_place_in_recep-Egg-None-CounterTop-3/trial_.../game.tw-pddl"). */
export function alfworldTaskType(label: string): string {
  const name = Object.keys(ALFWORLD_TASK_TYPES).find((k) => label.includes(k));
  return name === undefined ? label : ALFWORLD_TASK_TYPES[name];
}

export const householdPlugin = defineEnv({
  name: 'household',
  aliases: ['alfworld'],
  description: 'household tasks in the ALFWorld text format (six task types, procedural rooms)',
  options: z.strictObject({
    /** "move X to Y" (ALFWorld 0.4 and later) or "put X in/on Y" (ALFWorld 0.3.3, which AgentGym's server runs). */
    grammar: z.enum(['move', 'put']).default('move'),
    /** Also admit `examine` on the objects in view and `help`, as ALFWorld does; off by default, the command set the bundled model was trained on. */
    fullCommands: z.boolean().default(false),
  }),
  create: (o) => new HouseholdEnvironment(o),
  agent: householdAgent,
  recipe: {
    tasksPerIteration: 16, maxTurns: 50, maxPromptTokens: 2048, klCoef: 0.01, invalidPenalty: 0.1, miniBatchSize: 256,
    validationEvery: 5, validationTasks: 32, validationTemperature: 0.4, warmupRatio: 0,
  },
  reward: { success: HOUSEHOLD_WIN_REWARD },
  expert: { defaultDetour: DEFAULT_DETOUR, samples: householdExpertSamples, corpus: householdCorpus },
  // AgentGym's agentenv-alfworld: environments keyed by "id", reset to a game by its
  // index in the server's list (mappings_train.json's 2,420 games, then
  // mappings_test.json's 200), ALFWorld 0.3.3's "put X in/on Y" (a "move" from a policy
  // trained here is translated), 0/1 rewards, and the game's folder as its task type.
  agentgym: {
    name: 'alfworld',
    server: 'agentenv-alfworld',
    maxSteps: 50,
    idField: 'id',
    resetFields: (game) => ({ game, world_type: 'Text' }),
    tasks: { count: 2620, noun: 'games', train: '0-2419', validation: '2420-2619', test: '2420-2619' },
    liveness: { path: '/', answer: 'This is environment AlfWorld.' },
    unknownId: /The id \d+ is not valid\./,
    taskText: (obs) => obs.match(/Your task is to: (.*)/)?.[1]?.trim() ?? '',
    taskType: alfworldTaskType,
    translateAction,
  },
});
