// The shop's skill cards: general rules plus one card per product category (the task
// type), shipped as markdown next to this file and joined for the teacher's prompt.

import { readFileSync } from 'node:fs';
import { CATEGORIES } from './vocabulary.ts';

export const SHOP_TASK_TYPES: readonly string[] = CATEGORIES.map((c) => c.slug);

const cards = new Map<string, string>();

function card(name: string): string {
  let text = cards.get(name);
  if (text === undefined) {
    text = readFileSync(new URL(`./skills/${name}.md`, import.meta.url), 'utf8').trim();
    cards.set(name, text);
  }
  return text;
}

/** The skill text for a task type: the general card, then the category's card when there is one. */
export function shopSkill(taskType: string): string {
  const general = card('general');
  return SHOP_TASK_TYPES.includes(taskType) ? `${general}\n\n${card(taskType)}` : general;
}
