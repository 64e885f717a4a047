// The expert: search with the instruction's key words, open a product that satisfies the
// goal (the target or an equally good one), pick the goal's options, buy. It acts from
// any page, so every step's info can carry its next action.

import { type Product } from './catalogue.ts';
import { PRICE_CLAUSE } from './goals.ts';
import { productsOnPage, RESULTS_PER_PAGE, type Page } from './pages.ts';
import { shopReward, type ShopGoal } from './reward.ts';
import { type ShopSearchEngine } from './search_engine.ts';

const FILLER = new Set([
  'i', 'need', 'am', 'looking', 'for', 'find', 'me', 'want', 'to', 'buy', 'help', 'get', 'a', 'an', 'the', 'that',
  'which', 'is', 'are', 'with', 'and', 'in', 'of', 'it',
]);

/** The instruction without its price clause and filler words. */
export function instructionKeywords(instruction: string): string {
  const cut = instruction.indexOf(PRICE_CLAUSE);
  const wanted = cut >= 0 ? instruction.slice(0, cut) : instruction;
  return wanted
    .toLowerCase()
    .split(/[\s,:]+/)
    .filter((w) => w !== '' && !FILLER.has(w))
    .join(' ');
}

/** A product that scores exactly 1 once the goal's options are picked on it. */
export function satisfiesGoal(product: Product, goal: ShopGoal): boolean {
  for (const [group, value] of Object.entries(goal.goal_options)) {
    if (!(product.options[group] ?? []).includes(value)) return false;
  }
  return shopReward(product, goal, product.price, goal.goal_options).score === 1;
}

function searchQuery(goal: ShopGoal, engine: ShopSearchEngine): string {
  const keywords = instructionKeywords(goal.instruction_text);
  if (engine.search(keywords).some((p) => satisfiesGoal(p, goal))) return keywords;
  // The instruction's words did not surface a fitting product: fall back to the target's title.
  return goal.name.toLowerCase();
}

export function shopExpertAction(page: Page, goal: ShopGoal, engine: ShopSearchEngine): string | null {
  switch (page.kind) {
    case 'search':
      return `search[${searchQuery(goal, engine)}]`;
    case 'results': {
      const here = productsOnPage(page.results, page.page).find((p) => satisfiesGoal(p, goal));
      if (here !== undefined) return `click[${here.asin.toLowerCase()}]`;
      const at = page.results.findIndex((p) => satisfiesGoal(p, goal));
      if (at < 0) return 'click[back to search]';
      return Math.floor(at / RESULTS_PER_PAGE) + 1 > page.page ? 'click[next >]' : 'click[< prev]';
    }
    case 'item': {
      if (!satisfiesGoal(page.product, goal)) return 'click[< prev]';
      for (const [group, value] of Object.entries(goal.goal_options)) {
        if (page.options[group] !== value) return `click[${value}]`;
      }
      return 'click[buy now]';
    }
    case 'sub':
      return 'click[< prev]';
    case 'done':
      return null;
  }
}
