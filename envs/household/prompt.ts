// The per-turn prompt for the household agent. Structure follows the reference agent
// frameworks (docs/PROTOCOLS.md section 1); the wording is ours. Only the extracted actions
// of earlier turns go into the history, never earlier reasoning.

import type { ReasoningFormat } from '../../src/tokenizer/thinking.ts';
import { skillBlock } from '../../src/envs/skills_block.ts';
import { reasoningRequest } from '../think_action.ts';

export const HOUSEHOLD_HISTORY_LENGTH = 2;

export interface HouseholdTurn {
  /** What the agent saw before acting. */
  observation: string;
  /** The action it sent (the extracted text, or what the environment received). */
  action: string;
}

export interface HouseholdPromptInput {
  task: string;
  /** Every earlier turn of the episode, oldest first. */
  history: readonly HouseholdTurn[];
  observation: string;
  admissibleActions: readonly string[];
  /** Skill text for the teacher's privileged block; absent for the student. */
  skills?: string;
  /** How many recent turns to show (K). */
  historyLength?: number;
  /** Where the answer's reasoning goes (default 'tags', the reference's <think> </think>). */
  reasoning?: ReasoningFormat;
}

function formatActions(actions: readonly string[]): string {
  return `[${actions.map((a) => `'${a}'`).join(',\n ')}]`;
}

/** The closing request: reasoning as the thinking mode places it, then one action in <action> tags (the reference's wording with 'tags'). */
function actRequest(reasoning: ReasoningFormat | undefined): string {
  const before = reasoningRequest(
    reasoning,
    'First reason step by step about the situation inside <think> </think> tags. Then choose',
    'First reason step by step about the situation. Then choose',
  );
  return `${before || 'Choose'} exactly one admissible action and write it inside <action> </action> tags.`;
}

export function renderHouseholdPrompt(input: HouseholdPromptInput): string {
  const k = input.historyLength ?? HOUSEHOLD_HISTORY_LENGTH;
  const taken = input.history.length;
  const recent = k > 0 ? input.history.slice(-k) : [];
  const first = taken - recent.length + 1;
  const lines: string[] = [
    'You are an expert agent operating in a household environment (ALFWorld): you move between receptacles, open and close them, ' +
      'pick up and put down objects and use appliances to complete a task.',
    `Your task is to: ${input.task}`,
  ];
  if (taken === 0) {
    lines.push('You have not taken any steps yet.');
  } else {
    lines.push(
      `You have already taken ${taken} step(s). Your last ${recent.length} observation(s) and the action you took after each:`,
      ...recent.map((t, i) => `[Observation ${first + i}: '${t.observation}', Action ${first + i}: '${t.action}']`),
    );
  }
  lines.push(
    `You are now at step ${taken + 1}. Current observation: ${input.observation}`,
    `Admissible actions in the current situation: ${formatActions(input.admissibleActions)}.`,
    `Now it is your turn to act. ${actRequest(input.reasoning)}`,
  );
  const prompt = lines.join('\n');
  return input.skills === undefined ? prompt : skillBlock(input.skills) + prompt;
}
