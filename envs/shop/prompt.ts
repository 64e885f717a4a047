// The shop's per-turn prompt (docs/PROTOCOLS.md section 1): role, task, steps taken, the
// last K observation/action pairs, the current observation, the admissible actions,
// and the answer format; the privileged skills block goes first for the teacher. The
// answer format is the household's (<think> then <action>), so its parser and validity
// rule serve the shop unchanged.

import type { ReasoningFormat } from '../../src/tokenizer/thinking.ts';
import { skillBlock } from '../../src/envs/skills_block.ts';

import { parseAction, reasoningRequest, type ParsedAction } from '../think_action.ts';

export type { ParsedAction };

/** What the reference sends WebShop for a response without action tags: its last 20 characters. */
export const SHOP_UNTAGGED_TAIL = 20;

/** The reference's WebShop projection (webshop_projection). */
export const parseShopAction = (response: string): ParsedAction => parseAction(response, SHOP_UNTAGGED_TAIL);

export const SHOP_HISTORY_LENGTH = 2;

export interface ShopTurn {
  /** What the agent saw before acting. */
  observation: string;
  /** The extracted action string, never the reasoning around it. */
  action: string;
}

export interface ShopPromptInput {
  task: string;
  /** Every earlier turn, oldest first; the renderer keeps the last K. */
  history: readonly ShopTurn[];
  observation: string;
  admissibleActions: readonly string[];
  /** Skill card text for the teacher's privileged block; absent for the student. */
  skills?: string;
  /** How many recent turns to show (K, default 2). */
  historyLength?: number;
  /** Where the answer's reasoning goes (default 'tags', the reference's <think> </think>). */
  reasoning?: ReasoningFormat;
}

export function renderShopPrompt(input: ShopPromptInput): string {
  const k = input.historyLength ?? SHOP_HISTORY_LENGTH;
  const taken = input.history.length;
  const recent = k > 0 ? input.history.slice(-k) : [];
  const lines = ['You are an expert agent operating in the WebShop online store.', `Your task is to: ${input.task}.`];
  if (taken > 0) {
    lines.push(`You have already taken ${taken} step(s). Here are the last ${recent.length} observation(s) and the action you took after each:`);
    recent.forEach((turn, i) => {
      const n = taken - recent.length + i + 1;
      lines.push(`[Observation ${n}: '${turn.observation}', Action ${n}: '${turn.action}']`);
    });
  }
  lines.push(
    `You are now at step ${taken + 1} and your current observation is: ${input.observation}`,
    `Your admissible actions are:\n[\n${input.admissibleActions.map((a) => `'${a}'`).join(',\n')}\n]`,
    '',
    `${reasoningRequest(
      input.reasoning,
      'Think step by step about the page and the shopping goal inside <think> </think> tags, then choose',
      'Think step by step about the page and the shopping goal, then choose',
    ) || 'Choose'} one admissible action and write it inside <action> </action> tags.`,
  );
  const prompt = lines.join('\n');
  return input.skills === undefined ? prompt : skillBlock(input.skills.trim()) + prompt;
}
