// The shop's pages and their text form. Observations follow WebShop's "text" mode: the
// visible strings of the page joined by " [SEP] ", without the instruction header
// (the prompt carries the task). Clickables are lower-cased button, link and option
// texts, as WebShop's get_available_actions lists them.

import type { Product } from './catalogue.ts';

export const RESULTS_PER_PAGE = 10;
export const SEP = ' [SEP] ';

export type SubPage = 'description' | 'features' | 'reviews';

export type Page =
  | { kind: 'search' }
  | { kind: 'results'; keywords: string; results: readonly Product[]; page: number }
  | { kind: 'item'; keywords: string; results: readonly Product[]; page: number; product: Product; options: Record<string, string> }
  | { kind: 'sub'; keywords: string; results: readonly Product[]; page: number; product: Product; options: Record<string, string>; sub: SubPage }
  | { kind: 'done'; score: number };

export interface PageView {
  observation: string;
  hasSearchBar: boolean;
  clickables: string[];
}

export function formatPrice(price: number): string {
  return `$${price.toFixed(2)}`;
}

export function pageCount(results: readonly Product[]): number {
  return Math.max(1, Math.ceil(results.length / RESULTS_PER_PAGE));
}

export function productsOnPage(results: readonly Product[], page: number): readonly Product[] {
  return results.slice((page - 1) * RESULTS_PER_PAGE, page * RESULTS_PER_PAGE);
}

function resultsView(results: readonly Product[], page: number): PageView {
  const segments = ['Back to Search', `Page ${page} (Total results: ${results.length})`];
  const clickables = ['back to search'];
  if (page > 1) {
    segments.push('< Prev');
    clickables.push('< prev');
  }
  if (page < pageCount(results)) {
    segments.push('Next >');
    clickables.push('next >');
  }
  for (const p of productsOnPage(results, page)) {
    segments.push(p.asin, p.title, formatPrice(p.price));
    clickables.push(p.asin.toLowerCase());
  }
  return { observation: segments.join(SEP), hasSearchBar: false, clickables };
}

function itemView(product: Product): PageView {
  const segments = ['Back to Search', '< Prev'];
  const clickables = ['back to search', '< prev'];
  for (const [group, values] of Object.entries(product.options)) {
    segments.push(group, ...values);
    clickables.push(...values);
  }
  segments.push(product.title, `Price: ${formatPrice(product.price)}`, 'Rating: N.A.', 'Description', 'Features', 'Reviews', 'Buy Now');
  clickables.push('description', 'features', 'reviews', 'buy now');
  return { observation: segments.join(SEP), hasSearchBar: false, clickables };
}

function subPageView(product: Product, sub: SubPage): PageView {
  const body =
    sub === 'description' ? [product.description]
    : sub === 'features' ? product.features
    : product.reviews.flatMap((r) => [r.text, `${r.rating} out of 5 stars`]);
  return { observation: ['Back to Search', '< Prev', ...body].join(SEP), hasSearchBar: false, clickables: ['back to search', '< prev'] };
}

export function viewPage(page: Page): PageView {
  switch (page.kind) {
    case 'search': return { observation: 'Search', hasSearchBar: true, clickables: [] };
    case 'results': return resultsView(page.results, page.page);
    case 'item': return itemView(page.product);
    case 'sub': return subPageView(page.product, page.sub);
    case 'done':
      return {
        observation: ['Thank you for shopping with us!', 'Your score (min 0.0, max 1.0)', String(page.score)].join(SEP),
        hasSearchBar: false,
        clickables: [],
      };
  }
}

/** WebShop's available actions as the agent sees them (verl-agent's format). */
export function admissibleActions(view: PageView): string[] {
  return [...(view.hasSearchBar ? ['search[<your query>]'] : []), ...view.clickables.map((c) => `click[${c}]`)];
}
