// An episode as one growing chat (rollout.history: conversation; docs/PROTOCOLS.md
// section 1.4): the first user message is the environment's own prompt for the first
// turn, each response is an assistant message as the model sampled it, and each later
// user message is the environment's answer. Under a template that renders messages as
// they are (ChatML: the bundled model's, Qwen2.5's) every turn's prompt then starts with
// the previous turn's prompt and response, and the turns train as one sequence.

import type { ChatMessage } from '../tokenizer/tokenizer.ts';

export type PromptHistory = 'window' | 'conversation';

/** The user message of a later turn: what the environment answered, and the actions it admits now. */
export function followUpMessage(observation: string, admissibleActions: readonly string[]): string {
  const lines = [`Observation: ${observation.trim()}`];
  if (admissibleActions.length > 0) lines.push(`Admissible actions: [${admissibleActions.map((a) => `'${a}'`).join(', ')}]`);
  return lines.join('\n');
}

/** The chat of a turn: the messages of the turns before it, then its user message. */
export function turnChat(earlier: readonly ChatMessage[], user: string): ChatMessage[] {
  return [...earlier, { role: 'user', content: user }];
}

/** The same chat with its first user message replaced (the teacher's, with the skills block inside it). */
export function withFirstMessage(chat: readonly ChatMessage[], first: string): ChatMessage[] {
  return [{ role: 'user', content: first }, ...chat.slice(1)];
}
