// Environment kinds by name, for the CLI (`env serve household`) and the trainer.

import type { Environment } from '../src/envs/types.ts';
import { HouseholdEnvironment } from './household/env.ts';
import { SearchEnvironment } from './search/env.ts';
import { ShopEnvironment } from './shop/env.ts';

export const ENVIRONMENTS: Record<string, () => Environment> = {
  household: () => new HouseholdEnvironment(),
  shop: () => new ShopEnvironment(),
  search: () => new SearchEnvironment(),
};

export function environmentNames(): string[] {
  return Object.keys(ENVIRONMENTS).sort();
}

export function getEnvironment(name: string): Environment {
  const make = ENVIRONMENTS[name];
  if (!make) throw new Error(`unknown environment "${name}" (known: ${environmentNames().join(', ')})`);
  return make();
}
