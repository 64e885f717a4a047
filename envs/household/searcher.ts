// An expert that knows only what the agent could have seen. The oracle expert
// (expert.ts) walks straight to objects inside receptacles nobody has opened; a small
// model cloned from it learns to "take" things that are not there, because after
// every one of the oracle's "go to" the object was there. This one remembers which
// receptacles' contents it has seen, plans with the oracle on a copy of the world
// that holds only those, and when the object it needs is not among them it searches:
// the unseen receptacles where that kind of object can be, in the order the room
// lists them, opening closed ones. Its next move then depends on little more than
// where it stands and what it sees, which a model with a short history can imitate.

import { LAMPS, OBJECTS } from './catalog.ts';
import { searchRank } from './conventions.ts';
import { goalReceptacle, nextExpertAction } from './expert.ts';
import { isWon } from './goal.ts';
import { cloneWorld, held, isReachable, receptacle, type Receptacle, type World } from './world.ts';

/** What the next fetch is for: an item type, the receptacle types it can be in, and a receptacle not to take it from. */
interface Wanted {
  type: string;
  places: readonly string[];
  exclude: string | null;
}

function wanted(w: World): Wanted | null {
  const { type, object, target } = w.task;
  const hand = held(w);
  if (hand && hand.type !== object) return null;
  if (type === 'look_at_obj_in_light') {
    if (!hand) return { type: object, places: OBJECTS[object].places, exclude: null };
    return { type: target, places: LAMPS[target].places, exclude: null };
  }
  if (hand) return null;
  // A task that only moves the object never finds it where it must go, and the second
  // of two objects comes from somewhere other than where the first went.
  const simple = type === 'pick_and_place' || type === 'pick_two_obj_and_place';
  return {
    type: object,
    places: OBJECTS[object].places.filter((p) => !(simple && p === target)),
    exclude: type === 'pick_two_obj_and_place' ? goalReceptacle(w) : null,
  };
}

export interface SearchingExpertOptions {
  /**
   * Knows where things are usually kept (the skill cards' knowledge, conventions.ts)
   * and searches those places first; otherwise it searches in the room's order.
   */
  knowsUsualPlaces?: boolean;
}

export class SearchingExpert {
  private readonly seen = new Set<string>();
  private readonly knowsUsualPlaces: boolean;

  constructor(opts: SearchingExpertOptions = {}) {
    this.knowsUsualPlaces = opts.knowsUsualPlaces ?? false;
  }

  /** Notes what is visible in state `w`: the contents of the receptacle the agent stands at, unless it is closed. */
  private observe(w: World): void {
    const here = w.at === null ? undefined : receptacle(w, w.at);
    if (here && isReachable(here)) this.seen.add(here.name);
  }

  /** The next command from state `w` (which it also observes); null once the task is done. */
  next(w: World): string | null {
    this.observe(w);
    if (isWon(w)) return null;
    const known = this.knownWorld(w);
    const need = wanted(known);
    const visible = need !== null && known.items.some((o) => o.type === need.type && o.in !== null && o.in !== need.exclude);
    if (need === null || visible) return nextExpertAction(known);
    const order = this.searchOrder(w, need);
    // Everything seen and the object still missing: nothing left to learn by looking, so act on the true state.
    if (order.length === 0) return nextExpertAction(w);
    const here = w.at === null ? undefined : receptacle(w, w.at);
    // Standing at an unseen receptacle means its door is closed.
    if (here && order.includes(here)) return `open ${here.name}`;
    return `go to ${order[0].name}`;
  }

  /** The world as far as this expert knows it: items in receptacles it has not seen are left out. */
  private knownWorld(w: World): World {
    const known = cloneWorld(w);
    known.items = known.items.filter((o) => o.in === null || this.seen.has(o.in));
    return known;
  }

  /**
   * Unseen receptacles where the wanted item can be (any unseen one if none), in the
   * room's order, or with its usual places first when the expert knows them.
   */
  private searchOrder(w: World, need: Wanted): Receptacle[] {
    const unseen = w.receptacles.filter((r) => !this.seen.has(r.name) && r.name !== need.exclude);
    const likely = unseen.filter((r) => need.places.includes(r.type));
    const order = likely.length > 0 ? likely : unseen;
    if (!this.knowsUsualPlaces) return order;
    // A stable sort keeps the room's order within each rank.
    return order.sort((a, b) => searchRank(need.type, a.type) - searchRank(need.type, b.type));
  }
}
