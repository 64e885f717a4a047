// The generated product catalogue. One fixed seed builds the same products on every
// machine, so task seeds, expert plans and scores are reproducible everywhere.

import { Prng } from '../../src/util/random.ts';
import { BENEFITS, CATEGORIES, DESCRIPTION_LINES, REVIEWS, type ProductType } from './vocabulary.ts';

export interface Product {
  /** ASIN-like id, B0 then eight upper-case letters or digits. */
  asin: string;
  /** Category slug: the task type. */
  category: string;
  /** The product type's search query (WebShop's `query`). */
  query: string;
  /** The product type as instructions name it ("running shoes"). */
  typeName: string;
  /** Category path joined by " › " (WebShop's `product_category`). */
  productCategory: string;
  title: string;
  price: number;
  attributes: string[];
  /** Option group name to offered values, groups in display order. */
  options: Record<string, string[]>;
  description: string;
  features: string[];
  reviews: { rating: number; text: string }[];
}

export const CATALOGUE_SEED = 20220701;
const PRODUCTS_PER_TYPE = 42;
const ID_CHARS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';

function capitalize(phrase: string): string {
  return phrase.replace(/(^|\s)(\S)/g, (_, space: string, c: string) => space + c.toUpperCase());
}

function drawAsin(rng: Prng, taken: Set<string>): string {
  for (;;) {
    let id = 'B0';
    for (let i = 0; i < 8; i++) id += ID_CHARS[rng.int(0, ID_CHARS.length - 1)];
    if (!taken.has(id)) {
      taken.add(id);
      return id;
    }
  }
}

function makeProduct(rng: Prng, asin: string, slug: string, categoryName: string, brands: readonly string[], type: ProductType): Product {
  const brand = rng.pick(brands);
  const attributes = rng.shuffle(type.attributes).slice(0, rng.int(3, 5));
  const options: Record<string, string[]> = {};
  for (const [group, values] of Object.entries(type.options)) {
    const count = rng.int(Math.min(2, values.length), values.length);
    const chosen = new Set(rng.shuffle(values).slice(0, count));
    options[group] = values.filter((v) => chosen.has(v));
  }
  const [lo, hi] = type.price;
  const price = rng.int(lo * 100, hi * 100 - 1) / 100;
  const titled = attributes.slice(0, rng.int(1, 2)).map(capitalize);
  const title = `${brand} ${type.display}, ${titled.join(', ')}`;
  const described = attributes.slice(0, 3);
  const description =
    `This ${type.display.toLowerCase()} from ${brand} is ${described.slice(0, -1).join(', ')} and ${described[described.length - 1]}. ` +
    rng.shuffle(DESCRIPTION_LINES).slice(0, 2).join(' ');
  const features = attributes.map((a) => `${capitalize(a)} for ${rng.pick(BENEFITS)}`);
  const reviews = rng.shuffle(REVIEWS).slice(0, 2).map((text) => ({ rating: rng.int(3, 5), text }));
  return {
    asin,
    category: slug,
    query: type.query,
    typeName: type.display.toLowerCase(),
    productCategory: `${categoryName} › ${type.subcategory}`,
    title,
    price,
    attributes,
    options,
    description,
    features,
    reviews,
  };
}

function generateCatalogue(seed: number): Product[] {
  const rng = new Prng(seed);
  const taken = new Set<string>();
  const products: Product[] = [];
  for (const category of CATEGORIES) {
    for (const type of category.types) {
      for (let i = 0; i < PRODUCTS_PER_TYPE; i++) {
        products.push(makeProduct(rng, drawAsin(rng, taken), category.slug, category.name, category.brands, type));
      }
    }
  }
  // Interleave types so that catalogue order carries no hint of relevance.
  return rng.shuffle(products);
}

let cached: Product[] | undefined;
let byAsin: Map<string, Product> | undefined;

/** The shared catalogue (built once per process). */
export function catalogue(): readonly Product[] {
  cached ??= generateCatalogue(CATALOGUE_SEED);
  return cached;
}

export function productByAsin(asin: string): Product | undefined {
  byAsin ??= new Map(catalogue().map((p) => [p.asin, p]));
  return byAsin.get(asin.toUpperCase());
}

/** The text the search engine indexes for a product. */
export function productSearchText(p: Product): string {
  return [p.title, p.query, p.productCategory, p.attributes.join(', '), p.features.join('. '), p.description, Object.values(p.options).flat().join(', ')].join('\n');
}
