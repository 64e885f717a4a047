// The shop agent's turn contract: the shop prompt with K = 2 earlier turns, the
// <think>/<action> answer format, and the categories' skill cards its keywords pick.

import type { AgentSpec } from '../../src/envs/agent_spec.ts';
import { thinkActionSpec } from '../think_action.ts';
import { SHOP_MAX_STEPS } from './env.ts';
import { renderShopPrompt, SHOP_HISTORY_LENGTH, SHOP_UNTAGGED_TAIL } from './prompt.ts';
import { shopKeywordSkills } from './skills.ts';

export const shopAgent: AgentSpec = thinkActionSpec({
  env: 'shop',
  historyLength: SHOP_HISTORY_LENGTH,
  maxTurns: SHOP_MAX_STEPS,
  renderPrompt: (input) => renderShopPrompt({ ...input, historyLength: SHOP_HISTORY_LENGTH }),
  skills: (_taskType, prompt) => shopKeywordSkills(prompt),
}, SHOP_UNTAGGED_TAIL);
