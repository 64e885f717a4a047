// The shop's skill cards: general rules plus one card per product category (the task
// type), shipped as markdown next to this file and joined for the teacher's prompt.

import { join } from '../../src/storage/paths.ts';
import { shippedFile, storage } from '../../src/storage/storage.ts';
import { keywordTaskTypes } from '../../src/envs/skills_block.ts';
import { CATEGORIES } from './vocabulary.ts';

export const SHOP_TASK_TYPES: readonly string[] = CATEGORIES.map((c) => c.slug);

const cards = new Map<string, string>();

function card(name: string): string {
  let text = cards.get(name);
  if (text === undefined) {
    const file = shippedFile(join('envs', 'shop', 'skills', `${name}.md`));
    if (!file) throw new Error(`shop: no skill card envs/shop/skills/${name}.md among the files this program ships with`);
    text = storage().readText(file).trim();
    cards.set(name, text);
  }
  return text;
}

/**
 * Each category's keywords, the product types it sells (the queries its products were
 * listed under), as the reference's WebShop skill_mapping.json lists product nouns per
 * category.
 */
export const SHOP_TASK_KEYWORDS: readonly (readonly [string, readonly string[]])[] = CATEGORIES.map((c) => [c.slug, c.types.map((t) => t.query)]);

/**
 * The reference's routing for WebShop, teacher and policy alike: the general card and
 * the card of every category whose keywords occur in the prompt (the instruction and
 * the page, so a results page often brings several).
 */
export function shopKeywordSkills(prompt: string): string {
  return [card('general'), ...keywordTaskTypes(prompt, SHOP_TASK_KEYWORDS).map(card)].join('\n\n');
}
