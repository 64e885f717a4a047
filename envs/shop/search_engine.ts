// Product search: BM25 over each product's title, type, category, attributes, features,
// description and option values, returning at most 50 products like WebShop's engine.

import { Bm25Index } from '../bm25.ts';
import { catalogue, productSearchText, type Product } from './catalogue.ts';

export const MAX_RESULTS = 50;

export class ShopSearchEngine {
  private readonly index: Bm25Index;

  constructor(private readonly products: readonly Product[]) {
    this.index = new Bm25Index(products.map(productSearchText));
  }

  search(keywords: string, limit = MAX_RESULTS): Product[] {
    return this.index.search(keywords, limit).map((hit) => this.products[hit.index]);
  }
}

let shared: ShopSearchEngine | undefined;

/** The engine over the shared catalogue (indexed once per process). */
export function shopSearchEngine(): ShopSearchEngine {
  shared ??= new ShopSearchEngine(catalogue());
  return shared;
}
