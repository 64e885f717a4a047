// The search agent's turn contract: the Search-R1 prompt with K = 4 earlier turns,
// one <search> or <answer> block per turn, and the skill card the reference would pick.

import type { AgentSpec } from '../../src/envs/agent_spec.ts';
import { reasoningBlock } from '../think_action.ts';
import { SEARCH_MAX_TURNS } from './env.ts';
import { cutResponse, parseSearchResponse } from './parse.ts';
import { renderSearchPrompt, SEARCH_HISTORY_LENGTH } from './prompt.ts';
import { searchSkills } from './skills.ts';

export const searchAgent: AgentSpec = {
  env: 'search',
  historyLength: SEARCH_HISTORY_LENGTH,
  maxTurns: SEARCH_MAX_TURNS,
  // The environment answers any turn without a single well-formed block with Search-R1's "my previous action is invalid".
  noop: '',
  actionStops: ['</search>', '</answer>'],
  renderPrompt: (input) => renderSearchPrompt({ ...input, historyLength: SEARCH_HISTORY_LENGTH }),
  cutResponse,
  parse: (response) => {
    const p = parseSearchResponse(response);
    return { send: p.valid ? p.action : '', historyAction: p.action, valid: p.valid };
  },
  skills: (taskType, _prompt, reader) => searchSkills(taskType, reader),
  // The search expert's action is already a whole <search>/<answer> block.
  formatResponse: (thought, action, reasoning = 'tags') => `${reasoningBlock(thought, reasoning, '\n')}${action}`,
};
