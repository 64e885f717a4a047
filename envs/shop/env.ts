// The shop environment (WebShop text format): search[keywords] from any page (WebShop
// runs a search whatever the page, though it lists search only where the page has a
// search bar), click[value] on any listed clickable, a scored purchase on click[buy now].

import { z } from 'zod';
import { isSplit, type CreateOptions, type EnvInfo, type Environment, type EnvSession, type ResetResult, type StepResult } from '../../src/envs/types.ts';
import { EnvInputError, EpisodeDoneError } from '../errors.ts';
import { productByAsin } from './catalogue.ts';
import { shopExpertAction } from './expert.ts';
import { drawGoal } from './goals.ts';
import { admissibleActions, pageCount, SEP, viewPage, type Page, type PageView, type SubPage } from './pages.ts';
import { shopReward, type ShopGoal, type ShopScore } from './reward.ts';
import { shopSearchEngine, type ShopSearchEngine } from './search_engine.ts';

export const SHOP_MAX_STEPS = 15;
/** Training reward for a purchase that scores exactly 1. */
export const SHOP_WIN_REWARD = 10;

const ShopTaskSchema = z.object({
  asin: z.string().min(1),
  instruction_text: z.string().min(1),
  attributes: z.array(z.string()),
  goal_options: z.record(z.string(), z.string()),
  price_upper: z.number().positive(),
  category: z.string().optional(),
  query: z.string().optional(),
  name: z.string().optional(),
  product_category: z.string().optional(),
});

/** An explicit task: a ShopGoal whose target is in the catalogue; missing product fields are filled from it. */
export function parseShopTask(task: unknown): ShopGoal {
  const parsed = ShopTaskSchema.safeParse(task);
  if (!parsed.success) throw new EnvInputError(`shop task: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  const t = parsed.data;
  const target = productByAsin(t.asin);
  if (target === undefined) throw new EnvInputError(`shop task: unknown asin ${t.asin}`);
  return {
    asin: target.asin,
    category: t.category ?? target.category,
    query: t.query ?? target.query,
    name: t.name ?? target.title,
    product_category: t.product_category ?? target.productCategory,
    instruction_text: t.instruction_text,
    attributes: t.attributes,
    goal_options: t.goal_options,
    price_upper: t.price_upper,
  };
}

const SUB_PAGES: readonly SubPage[] = ['description', 'features', 'reviews'];

/** How the shop renders its pages. */
export interface ShopOptions {
  /** Start every page with WebShop's "Instruction: [SEP] <task> [SEP]" header (the search page with "WebShop [SEP]" before it). */
  instructionHeader?: boolean;
}

export class ShopSession implements EnvSession {
  readonly task: string;
  private page: Page = { kind: 'search' };
  private steps = 0;
  private done = false;
  private purchase: ShopScore | undefined;

  constructor(
    readonly goal: ShopGoal,
    private readonly engine: ShopSearchEngine,
    private readonly maxSteps = SHOP_MAX_STEPS,
    private readonly options: ShopOptions = {},
  ) {
    this.task = goal.instruction_text;
  }

  /** A page's text, with WebShop's instruction header when asked for. */
  private render(view: PageView): string {
    if (!this.options.instructionHeader) return view.observation;
    const header = `Instruction:${SEP}${this.goal.instruction_text}${SEP}`;
    return this.page.kind === 'search' ? `WebShop${SEP}${header}${view.observation}` : `${header}${view.observation}`;
  }

  reset(): ResetResult {
    this.page = { kind: 'search' };
    this.steps = 0;
    this.done = false;
    this.purchase = undefined;
    const view = viewPage(this.page);
    return { observation: this.render(view), admissible_actions: admissibleActions(view), info: this.info() };
  }

  step(action: string): StepResult {
    if (this.done) throw new EpisodeDoneError('shop: step after the episode ended');
    this.steps++;
    const next = this.transition(viewPage(this.page), action);
    if (next !== null) this.page = next;
    const view = viewPage(this.page);
    let reward = 0;
    if (next?.kind === 'done') {
      reward = this.purchase!.score === 1 ? SHOP_WIN_REWARD : 0;
      this.done = true;
    }
    if (this.steps >= this.maxSteps) this.done = true;
    return {
      observation: next === null ? 'Nothing happens.' : this.render(view),
      reward,
      done: this.done,
      admissible_actions: this.done ? [] : admissibleActions(view),
      info: this.info(),
    };
  }

  close(): void {}

  private info(): EnvInfo {
    const score = this.purchase?.score ?? 0;
    const info: EnvInfo = {
      won: score === 1,
      score,
      task_type: this.goal.category,
      expert_action: this.done ? null : shopExpertAction(this.page, this.goal, this.engine),
    };
    if (this.purchase !== undefined) info.score_details = this.purchase;
    return info;
  }

  /** The page an action leads to, or null when the action is not admissible here. */
  private transition(view: PageView, action: string): Page | null {
    const m = /^(search|click)\[(.*)\]$/s.exec(action.trim().toLowerCase());
    if (m === null) return null;
    const arg = m[2].trim();
    const page = this.page;
    if (m[1] === 'search') {
      return arg !== '' ? { kind: 'results', keywords: arg, results: this.engine.search(arg), page: 1 } : null;
    }
    if (!view.clickables.includes(arg)) return null;
    if (arg === 'back to search') return { kind: 'search' };
    switch (page.kind) {
      case 'results': {
        if (arg === 'next >') return { ...page, page: Math.min(page.page + 1, pageCount(page.results)) };
        if (arg === '< prev') return { ...page, page: Math.max(page.page - 1, 1) };
        const product = page.results.find((p) => p.asin.toLowerCase() === arg)!;
        return { kind: 'item', keywords: page.keywords, results: page.results, page: page.page, product, options: {} };
      }
      case 'item': {
        if (arg === '< prev') return { kind: 'results', keywords: page.keywords, results: page.results, page: page.page };
        if (arg === 'buy now') {
          this.purchase = shopReward(page.product, this.goal, page.product.price, page.options);
          return { kind: 'done', score: this.purchase.score };
        }
        const sub = SUB_PAGES.find((s) => s === arg);
        if (sub !== undefined) return { ...page, kind: 'sub', sub };
        const group = Object.keys(page.product.options).find((g) => page.product.options[g].includes(arg))!;
        return { ...page, options: { ...page.options, [group]: arg } };
      }
      case 'sub':
        return { kind: 'item', keywords: page.keywords, results: page.results, page: page.page, product: page.product, options: page.options };
      default:
        return null;
    }
  }
}

export class ShopEnvironment implements Environment {
  readonly name = 'shop';
  readonly version = '1.0.0';
  readonly maxSteps = SHOP_MAX_STEPS;

  constructor(private readonly options: ShopOptions = {}) {}

  create(opts: CreateOptions): ShopSession {
    if (!isSplit(opts.split)) throw new EnvInputError(`shop: unknown split ${String(opts.split)}`);
    if (!Number.isSafeInteger(opts.seed)) throw new EnvInputError(`shop: seed must be an integer, got ${String(opts.seed)}`);
    const goal = opts.task !== undefined && opts.task !== null ? parseShopTask(opts.task) : drawGoal(opts.split, opts.seed);
    return new ShopSession(goal, shopSearchEngine(), this.maxSteps, this.options);
  }
}
