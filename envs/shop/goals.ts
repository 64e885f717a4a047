// Purchase goals drawn from a (split, seed) pair. Each goal is written from a target
// product: some of its attributes, one value of each of its option groups, and a price
// bound above its price (WebShop: the larger of two of the next four multiples of ten).
// The splits never share a target: valid_unseen targets are of product types held out
// of training (one per category), valid_seen targets are every fifth product of the
// other types, and train gets the rest.

import type { Split } from '../../src/envs/types.ts';
import { Prng } from '../../src/util/random.ts';
import { catalogue, type Product } from './catalogue.ts';
import type { ShopGoal } from './reward.ts';

export const HELD_OUT_TYPES: readonly string[] = ['phone stand', 'rain jacket', 'sneakers', 'nail polish', 'olive oil', 'coffee mug'];

const SPLIT_INDEX: Record<Split, number> = { train: 0, valid_seen: 1, valid_unseen: 2 };

let pools: Record<Split, Product[]> | undefined;

function splitPools(): Record<Split, Product[]> {
  if (pools !== undefined) return pools;
  const out: Record<Split, Product[]> = { train: [], valid_seen: [], valid_unseen: [] };
  catalogue().forEach((p, i) => {
    if (HELD_OUT_TYPES.includes(p.query)) out.valid_unseen.push(p);
    else if (i % 5 === 0) out.valid_seen.push(p);
    else out.train.push(p);
  });
  pools = out;
  return out;
}

/** The products a split draws its targets from. */
export function targetPool(split: Split): readonly Product[] {
  return splitPools()[split];
}

function listPhrase(items: readonly string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** "with color: black, and size: large", as WebShop's synthetic goals write options. */
function optionsAsFields(options: Record<string, string>): string {
  const fields = Object.entries(options).map(([k, v]) => `${k}: ${v}`);
  return fields.length > 0 ? ` with ${fields.join(', and ')}` : '';
}

/** "in black color, in size large", closer to the human-written instructions. */
function optionsAsPhrase(options: Record<string, string>): string {
  const parts = Object.entries(options).map(([group, value]) => {
    switch (group) {
      case 'color': return `in ${value} color`;
      case 'size': return `in size ${value}`;
      case 'compatible phone': return `for a ${value}`;
      case 'length': return `that is ${value} long`;
      default: return `with ${value} ${group}`;
    }
  });
  return parts.length > 0 ? ` ${listPhrase(parts)}` : '';
}

/** "a " before a singular type, nothing before a plural one ("hiking boots", "jeans"). */
function a(type: string): string {
  return isPlural(type) ? '' : 'a ';
}

function is(type: string): string {
  return isPlural(type) ? 'are' : 'is';
}

function isPlural(type: string): boolean {
  return /[^s]s$/.test(type);
}

const TEMPLATES: readonly ((type: string, attrs: string[], options: Record<string, string>) => string)[] = [
  (type, attrs, options) => `i need ${a(type)}${listPhrase(attrs)} ${type}${optionsAsFields(options)}`,
  (type, attrs, options) => `i am looking for ${a(type)}${type} that ${is(type)} ${listPhrase(attrs)}${optionsAsPhrase(options)}`,
  (type, attrs, options) => `find me ${a(type)}${listPhrase(attrs)} ${type}${optionsAsPhrase(options)}`,
  (type, attrs, options) => `i want to buy ${a(type)}${type} which ${is(type)} ${listPhrase(attrs)}${optionsAsFields(options)}`,
  (type, attrs, options) => `help me find ${a(type)}${type} with ${listPhrase(attrs)}${optionsAsPhrase(options)}`,
];

export const PRICE_CLAUSE = ', and price lower than ';

function priceUpper(rng: Prng, price: number): number {
  const above: number[] = [];
  for (let p = 10; p < 1000 && above.length < 4; p += 10) if (p > price) above.push(p);
  const [a, b] = rng.shuffle(above).slice(0, 2);
  return Math.max(a, b);
}

/** The goal for one task; the same (split, seed) gives the same goal everywhere. */
export function drawGoal(split: Split, seed: number): ShopGoal {
  // Seeds are spread over three disjoint residue classes, one per split.
  const rng = new Prng(seed * 3 + SPLIT_INDEX[split]);
  const target = rng.pick(targetPool(split));
  return goalFromProduct(rng, target);
}

export function goalFromProduct(rng: Prng, target: Product): ShopGoal {
  const attributes = rng.shuffle(target.attributes).slice(0, rng.int(1, Math.min(3, target.attributes.length)));
  const goalOptions: Record<string, string> = {};
  for (const [group, values] of Object.entries(target.options)) goalOptions[group] = rng.pick(values);
  const upper = priceUpper(rng, target.price);
  const instruction = rng.pick(TEMPLATES)(target.typeName, attributes, goalOptions);
  return {
    asin: target.asin,
    category: target.category,
    query: target.query,
    name: target.title,
    product_category: target.productCategory,
    instruction_text: `${instruction}${PRICE_CLAUSE}${upper.toFixed(2)} dollars`,
    attributes,
    goal_options: goalOptions,
    price_upper: upper,
  };
}
