// The search agent's turn contract: the Search-R1 prompt with K = 4 earlier turns,
// one <search> or <answer> block per turn, and the question type's skill card.

import type { AgentSpec } from '../../src/envs/agent_spec.ts';
import { SEARCH_MAX_TURNS } from './env.ts';
import { cutResponse, parseSearchResponse } from './parse.ts';
import { renderSearchPrompt, SEARCH_HISTORY_LENGTH } from './prompt.ts';
import { searchSkill } from './skills.ts';

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
  skills: searchSkill,
  // The search expert's action is already a whole <search>/<answer> block.
  formatResponse: (thought, action) => `<think>\n${thought}\n</think>\n${action}`,
};
