// WebShop's purchase score (web_agent_site/engine/goal.py, get_reward), term by term:
//   score = r_type * (matched attributes + matched options + r_price) / (attributes + options + 1)
// r_type compares the bought product's type with the target's (same query, two shared
// category levels, or shared title nouns), attributes match fuzzily or by substring of
// the product text, options exactly for size and fuzzily otherwise, r_price is 1 when
// the price is within the budget.

import { type Product } from './catalogue.ts';
import { fuzzyMatch, normalizeColor } from './fuzzy.ts';
import { CATEGORIES, EXACT_MATCH_OPTIONS } from './vocabulary.ts';

/** A purchase goal, with WebShop's field names (also the JSON of an explicit task). */
export interface ShopGoal {
  /** The product the instruction was written from. */
  asin: string;
  /** Category slug: the task type. */
  category: string;
  query: string;
  /** The target's title. */
  name: string;
  product_category: string;
  instruction_text: string;
  attributes: string[];
  goal_options: Record<string, string>;
  price_upper: number;
}

export interface ShopScore {
  score: number;
  r_type: number;
  r_att: number;
  r_option: number | null;
  r_price: boolean;
  query_match: boolean;
  category_match: boolean;
  title_score: number;
}

const NOUNS = new Set(CATEGORIES.flatMap((c) => [...c.brands.map((b) => b.toLowerCase()), ...c.types.flatMap((t) => t.nouns)]));

/**
 * The nouns of a title. WebShop asks spaCy for NOUN/PROPN tokens; for our generated
 * titles those are the brand and the product-type words, so a fixed vocabulary gives
 * the same answer without a tagger.
 */
export function titleNouns(title: string): string[] {
  return title.toLowerCase().split(/[^a-z0-9]+/).filter((w) => NOUNS.has(w));
}

function categoryLevels(path: string): Set<string> {
  return new Set(path.split('›').map((s) => s.trim()));
}

function typeReward(product: Product, goal: ShopGoal): Pick<ShopScore, 'r_type' | 'query_match' | 'category_match' | 'title_score'> {
  const queryMatch = product.query === goal.query;
  const goalLevels = categoryLevels(goal.product_category);
  const categoryMatch = [...categoryLevels(product.productCategory)].filter((l) => goalLevels.has(l)).length >= 2;
  const bought = new Set(titleNouns(product.title));
  const desired = new Set(titleNouns(goal.name));
  const titleScore = desired.size === 0 ? 0.2 : [...desired].filter((n) => bought.has(n)).length / desired.size;
  let rType = queryMatch || categoryMatch || titleScore > 0.2 ? 1 : 0.5;
  if (titleScore < 0.1) rType = 0.1;
  if (titleScore === 0) rType = 0;
  return { r_type: rType, query_match: queryMatch, category_match: categoryMatch, title_score: titleScore };
}

function inProductText(product: Product, phrase: string): boolean {
  return (
    product.title.toLowerCase().includes(phrase) ||
    product.features.join(' ').toLowerCase().includes(phrase) ||
    product.description.toLowerCase().includes(phrase)
  );
}

function attributeMatches(product: Product, goal: ShopGoal): number {
  let matches = 0;
  for (const wanted of goal.attributes) {
    if (product.attributes.some((a) => fuzzyMatch(a, wanted)) || inProductText(product, wanted)) matches++;
  }
  return matches;
}

function optionMatches(product: Product, goal: ShopGoal, chosen: Record<string, string>): number {
  const wanted = Object.values(goal.goal_options).map(normalizeColor);
  let matches = 0;
  for (const [group, raw] of Object.entries(chosen)) {
    const value = normalizeColor(raw);
    const matched = EXACT_MATCH_OPTIONS.includes(group.toLowerCase())
      ? wanted.includes(value)
      : wanted.some((w) => fuzzyMatch(w, value));
    if (matched || inProductText(product, value)) matches++;
  }
  // WebShop counts per chosen option; the cap keeps the score within [0, 1] when a
  // buyer picks options in groups the goal does not name.
  return Math.min(matches, wanted.length);
}

/** The score of buying `product` at `price` with the `chosen` options (group to value). */
export function shopReward(product: Product, goal: ShopGoal, price: number, chosen: Record<string, string>): ShopScore {
  const type = typeReward(product, goal);
  const rPrice = price <= goal.price_upper;
  const attrs = attributeMatches(product, goal);
  const opts = optionMatches(product, goal, chosen);
  const nOptions = Object.keys(goal.goal_options).length;
  const total = (attrs + opts + (rPrice ? 1 : 0)) / (goal.attributes.length + nOptions + 1);
  return {
    score: total * type.r_type,
    ...type,
    r_att: goal.attributes.length > 0 ? attrs / goal.attributes.length : 0,
    r_option: nOptions > 0 ? opts / nOptions : null,
    r_price: rPrice,
  };
}
