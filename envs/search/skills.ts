// The search agent's skill cards: general rules plus one card per question type. Real
// datasets report their data_source as the task type; the known ones map to the card
// of the question type they mostly hold.

import { readFileSync } from 'node:fs';

export const SEARCH_TASK_TYPES: readonly string[] = ['single_hop', 'two_hop'];

const DATA_SOURCE_CARDS: Record<string, string> = {
  nq: 'single_hop',
  triviaqa: 'single_hop',
  popqa: 'single_hop',
  hotpotqa: 'two_hop',
  '2wikimultihopqa': 'two_hop',
  musique: 'two_hop',
  bamboogle: 'two_hop',
};

const cards = new Map<string, string>();

function card(name: string): string {
  let text = cards.get(name);
  if (text === undefined) {
    text = readFileSync(new URL(`./skills/${name}.md`, import.meta.url), 'utf8').trim();
    cards.set(name, text);
  }
  return text;
}

/** The skill text for a task type: the general card, then the question type's card when known. */
export function searchSkill(taskType: string): string {
  const type = SEARCH_TASK_TYPES.includes(taskType) ? taskType : DATA_SOURCE_CARDS[taskType.toLowerCase()];
  const general = card('general');
  return type === undefined ? general : `${general}\n\n${card(type)}`;
}
