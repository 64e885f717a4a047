// The search agent's skill cards: general rules plus one card per question type. Real
// datasets report their data_source as the task type; the known ones map to the card
// of the question type they mostly hold, as the reference maps data sources to cards.

import { join } from '../../src/storage/paths.ts';
import { shippedFile, storage } from '../../src/storage/storage.ts';

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
    const file = shippedFile(join('envs', 'search', 'skills', `${name}.md`));
    if (!file) throw new Error(`search: no skill card envs/search/skills/${name}.md among the files this program ships with`);
    text = storage().readText(file).trim();
    cards.set(name, text);
  }
  return text;
}

/**
 * The reference's routing for search: the teacher's card follows a dataset's
 * data_source (get_privileged_info_from_data_source) and is otherwise the general card,
 * as for the built-in questions, which carry none; the policy's (Skill-GRPO) is always
 * the general card, the search mapping having no keywords.
 */
export function searchSkills(taskType: string, reader: 'policy' | 'teacher'): string {
  const type = reader === 'teacher' ? DATA_SOURCE_CARDS[taskType.toLowerCase()] : undefined;
  return type === undefined ? card('general') : `${card('general')}\n\n${card(type)}`;
}
