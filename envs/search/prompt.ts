// The search agent's per-turn prompt (docs/PROTOCOLS.md section 1 structure, Search-R1's
// answer format): role, question, steps taken, the last K searches each followed by the
// information it returned, the admissible actions, and the format rules. The newest
// result is the current observation, so it appears once, as the last history entry.
// The optional privileged skills block goes first, for the teacher.

import type { ReasoningFormat } from '../../src/tokenizer/thinking.ts';
import { skillBlock } from '../../src/envs/skills_block.ts';
import { reasoningRequest } from '../think_action.ts';

export const SEARCH_HISTORY_LENGTH = 4;

export interface SearchTurn {
  /** What the agent saw before acting (the question, or the previous step's result). */
  observation: string;
  /** The extracted <search>/<answer> block ('' for an invalid turn), never the reasoning. */
  action: string;
}

export interface SearchPromptInput {
  /** The question. */
  task: string;
  /** Every earlier turn, oldest first; the renderer keeps the last K. */
  history: readonly SearchTurn[];
  /** The newest result (after a search: the <information> block). */
  observation: string;
  admissibleActions: readonly string[];
  /** Skill card text for the teacher's privileged block; absent for the student. */
  skills?: string;
  /** How many recent turns to show (K, default 4). */
  historyLength?: number;
  /** Where the answer's reasoning goes (default 'tags', the reference's <think> </think>). */
  reasoning?: ReasoningFormat;
}

export function renderSearchPrompt(input: SearchPromptInput): string {
  const k = input.historyLength ?? SEARCH_HISTORY_LENGTH;
  const taken = input.history.length;
  const first = Math.max(0, taken - k);
  const lines = ['You are an expert agent answering a question with the help of a search engine.', `Your question: ${input.task}`];
  if (taken > 0) {
    lines.push(`You have already taken ${taken} step(s). Here are your last ${taken - first} action(s), each followed by what it returned:`);
    for (let i = first; i < taken; i++) {
      const result = i + 1 < taken ? input.history[i + 1].observation : input.observation;
      lines.push(`Step ${i + 1}: ${input.history[i].action}${result}`);
    }
  }
  lines.push(
    `You are now at step ${taken + 1}.`,
    `Your admissible actions are:\n[\n${input.admissibleActions.map((a) => `'${a}'`).join(',\n')}\n]`,
    '',
    `${reasoningRequest(input.reasoning, 'First reason inside <think> </think> tags. Then do', 'First reason. Then do') || 'Do'} exactly one of the following:`,
    '(1) If a fact you need is missing, search for it: <search> your query </search>. Results come back between <information> and </information>.',
    '(2) If you know the answer, give only the answer, a few words and no sentence, inside <answer> </answer>, for example <answer> Beijing </answer>.',
  );
  const prompt = lines.join('\n');
  return input.skills === undefined ? prompt : skillBlock(input.skills.trim()) + prompt;
}
