// The household agent's turn contract: the household prompt with K = 2 earlier turns,
// the <think>/<action> answer format, and the skill cards the reference would pick.

import type { AgentSpec } from '../../src/envs/agent_spec.ts';
import { thinkActionSpec } from '../think_action.ts';
import { TASK_TYPES } from './catalog.ts';
import { HOUSEHOLD_MAX_STEPS } from './env.ts';
import { HOUSEHOLD_HISTORY_LENGTH, renderHouseholdPrompt } from './prompt.ts';
import { householdKeywordSkills, householdSkillCard, householdSkills } from './skills.ts';

/** What the reference sends ALFWorld for a response without action tags: its last 30 characters. */
const HOUSEHOLD_UNTAGGED_TAIL = 30;

export const householdAgent: AgentSpec = thinkActionSpec({
  env: 'household',
  historyLength: HOUSEHOLD_HISTORY_LENGTH,
  maxTurns: HOUSEHOLD_MAX_STEPS,
  renderPrompt: (input) => renderHouseholdPrompt({ ...input, historyLength: HOUSEHOLD_HISTORY_LENGTH }),
  // As the reference: the teacher's cards follow the task type (the gamefile's), the
  // policy's (Skill-GRPO) keywords over the prompt. A task type the cards do not know
  // (an ALFWorld server's path label) gets the general card.
  skills: (taskType, prompt, reader) => {
    if (reader === 'policy') return householdKeywordSkills(prompt);
    return (TASK_TYPES as readonly string[]).includes(taskType) ? householdSkills(taskType) : householdSkillCard('general');
  },
}, HOUSEHOLD_UNTAGGED_TAIL);
