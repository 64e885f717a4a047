// The search agent's turn contract: the Search-R1 prompt with K = 4 earlier turns, the
// action read as one of the two reference code bases reads it (parse.ts), and the skill
// card the reference would pick.

import type { AgentSpec } from '../../src/envs/agent_spec.ts';
import { reasoningBlock } from '../think_action.ts';
import { SEARCH_MAX_TURNS } from './env.ts';
import { cutAfterAction, parseSearchTurn, type SearchParsing } from './parse.ts';
import { renderSearchPrompt, SEARCH_HISTORY_LENGTH } from './prompt.ts';
import { searchSkills } from './skills.ts';

export function searchAgent(parsing: SearchParsing): AgentSpec {
  return {
    env: 'search',
    historyLength: SEARCH_HISTORY_LENGTH,
    maxTurns: SEARCH_MAX_TURNS,
    // A turn without a block sends nothing, which the environment answers with Search-R1's "my previous action is invalid".
    noop: '',
    actionStops: ['</search>', '</answer>'],
    cutsAfterAction: parsing === 'search-r1',
    renderPrompt: (input) => renderSearchPrompt({ ...input, historyLength: SEARCH_HISTORY_LENGTH }),
    cutResponse: cutAfterAction,
    parse: (response) => {
      // SDAR acts on a flagged turn's block too; only a turn without one sends nothing.
      const p = parseSearchTurn(response, parsing);
      return { send: p.action, historyAction: p.action, valid: p.valid };
    },
    skills: (taskType, _prompt, reader) => searchSkills(taskType, reader),
    // The search expert's action is already a whole <search>/<answer> block.
    formatResponse: (thought, action, reasoning = 'tags') => `${reasoningBlock(thought, reasoning, '\n')}${action}`,
  };
}
