// A stand-in for AgentGym's WebShop server (agentenv-webshop: server.py,
// environment.py, model.py, over WebShop's WebAgentTextEnv), playing our shop. What a
// client sees is what the real server sends:
// - routes: GET / ("ok"), GET /list_envs, POST /create -> a bare id (a random integer,
//   the environment already reset to a random goal), POST /reset {env_idx,
//   session_id?} -> [observation, null], POST /step {env_idx, action} ->
//   {state, reward, done, info: null}, GET /available_actions?env_idx= ->
//   {has_search_bar, clickables}, GET /observation?env_idx=,
//   GET /instruction_text?env_idx=; no route releases an environment. (/state, whose
//   answer is the page's HTML, is left out: our pages have none.)
// - the index space: session_id indexes the server's goals, 6,910 by default (WebShop's
//   1,000-product set), as a Python list; WebShop's own code tests on goals 0-499 and
//   validates on 500-1499, which here are our valid_unseen and valid_seen goals, the
//   rest our train goals.
// - errors: none caught: an unknown env_idx or a goal past the list raises in the
//   route, which FastAPI answers 500 "Internal Server Error" (text); 422 for a
//   malformed body.
// - steps as WebAgentTextEnv takes them: search[...] with words runs a search from any
//   page; click[...] works on the page's clickables but "search", which the search
//   page lists for its button; anything else changes nothing (reward 0, the same
//   page). The reward is the purchase score in [0, 1], on the click[buy now] that ends
//   the episode; WebShop itself has no step cap.

import { Prng } from '../../src/util/random.ts';
import { ShopSession } from '../shop/env.ts';
import { drawGoal } from '../shop/goals.ts';
import { shopSearchEngine } from '../shop/search_engine.ts';
import type { Split } from '../../src/envs/types.ts';
import { pythonIndex, serveFastApi, type FastApiHandle } from './fastapi.ts';

export const WEBSHOP_GOALS = 6910;

/** WebShop's own split of the goal list (baseline_models/env.py): test, then validation, then training goals. */
function goal(i: number): { split: Split; seed: number } {
  if (i < 500) return { split: 'valid_unseen', seed: i };
  if (i < 1500) return { split: 'valid_seen', seed: i - 500 };
  return { split: 'train', seed: i - 1500 };
}

/** The page as WebAgentTextEnv shows it: its text, search bar and clickables. */
interface PageState {
  observation: string;
  hasSearchBar: boolean;
  clickables: string[];
  done: boolean;
}

/** What WebShop's get_available_actions lists from our admissible actions: the search page's button is a clickable too. */
function pageState(observation: string, admissible: readonly string[], done: boolean): PageState {
  const hasSearchBar = admissible.some((a) => a.startsWith('search['));
  const clicks = admissible.filter((a) => a.startsWith('click[')).map((a) => a.slice(6, -1));
  return { observation, hasSearchBar, clickables: hasSearchBar ? ['search', ...clicks] : clicks, done };
}

export interface WebshopServerOptions {
  host?: string;
  port?: number;
  /** Goals in the server's list. */
  goals?: number;
  /** Seeds the ids /create hands out and the goals of fresh environments (the real server seeds from the clock). */
  seed?: number;
}

export interface WebshopServerHandle extends FastApiHandle {
  /** Environments the server holds (AgentGym's never releases one). */
  environments(): number;
}

export async function serveWebshop(options: WebshopServerOptions = {}): Promise<WebshopServerHandle> {
  const goals = options.goals ?? WEBSHOP_GOALS;
  const rng = new Prng(options.seed ?? 0);
  const engine = shopSearchEngine();
  const envs = new Map<number, { session: ShopSession; page: PageState }>();

  const start = (index: number) => {
    const i = pythonIndex(index, goals);
    // WebShop's SimServer indexes its goal list: an IndexError, which the route does not catch.
    if (i === null) throw new RangeError('list index out of range');
    const { split, seed } = goal(i);
    const session = new ShopSession(drawGoal(split, seed), engine, Infinity, { instructionHeader: true });
    const first = session.reset();
    return { session, page: pageState(first.observation, first.admissible_actions, false) };
  };
  /** environment.py indexes its dict of environments: a KeyError for an id it does not hold. */
  const env = (id: unknown) => {
    const e = envs.get(id as number);
    if (e === undefined) throw new Error(`KeyError: ${String(id)}`);
    return e;
  };

  const server = await serveFastApi([
    { method: 'GET', path: '/', handle: () => 'ok' },
    { method: 'GET', path: '/list_envs', handle: () => [...envs.keys()] },
    {
      method: 'POST', path: '/create',
      handle: () => {
        const id = rng.int(0, 48_950_076);
        envs.set(id, start(rng.int(0, goals - 1)));
        return id;
      },
    },
    {
      method: 'POST', path: '/reset', body: { env_idx: 'int', session_id: 'int?' },
      handle: ({ env_idx, session_id }) => {
        env(env_idx);
        const fresh = start(session_id === null ? rng.int(0, goals - 1) : (session_id as number));
        envs.set(env_idx as number, fresh);
        return [fresh.page.observation, null];
      },
    },
    {
      method: 'POST', path: '/step', body: { env_idx: 'int', action: 'str' },
      handle: ({ env_idx, action }) => {
        const e = env(env_idx);
        const m = /^(.+)\[(.+)\]/s.exec(action as string);
        const name = m?.[1];
        const arg = m?.[2].toLowerCase();
        const valid = !e.page.done && arg !== undefined &&
          ((name === 'search' && arg !== '') || (name === 'click' && arg !== 'search' && e.page.clickables.includes(arg)));
        if (!valid) return { state: e.page.observation, reward: 0, done: false, info: null };
        const r = e.session.step(`${name}[${arg}]`);
        e.page = pageState(r.observation, r.admissible_actions, r.done);
        return { state: r.observation, reward: r.done ? (r.info.score as number) : 0, done: r.done, info: null };
      },
    },
    {
      method: 'GET', path: '/available_actions', query: { env_idx: 'int' },
      handle: ({ env_idx }) => {
        const { page } = env(env_idx);
        return { has_search_bar: page.hasSearchBar, clickables: page.clickables };
      },
    },
    { method: 'GET', path: '/observation', query: { env_idx: 'int' }, handle: ({ env_idx }) => env(env_idx).page.observation },
    { method: 'GET', path: '/instruction_text', query: { env_idx: 'int' }, handle: ({ env_idx }) => `Instruction: ${env(env_idx).session.task}` },
  ], options);
  return { ...server, environments: () => envs.size };
}
