// A scripted expert that solves every generated task from any state. It sees the whole
// world (including the inside of closed receptacles it has not opened yet), so it
// walks straight to the objects it needs; the plan is recomputed from the current
// state each step, so it recovers from whatever the agent did before.

import { APPLIANCE, transformOf } from './catalog.ts';
import { canContain, execute } from './commands.ts';
import { deliveredCounts, hasRequiredState, isWon } from './goal.ts';
import { cloneWorld, held, receptacle, type Item, type World } from './world.ts';

/** Go to a receptacle, open it if it is closed, then do `final` there. */
function approach(w: World, name: string, final: string): string {
  if (w.at !== name) return `go to ${name}`;
  const r = receptacle(w, name)!;
  if (r.openable && !r.open) return `open ${name}`;
  return final;
}

/** Put a held object that the task does not need down somewhere it fits. */
function putAway(w: World, hand: Item): string {
  const here = w.at === null ? undefined : receptacle(w, w.at);
  const spot = here && canContain(here.type, hand) ? here : w.receptacles.find((r) => canContain(r.type, hand));
  if (!spot) throw new Error(`household expert: nowhere to put ${hand.name} down`);
  return approach(w, spot.name, `move ${hand.name} to ${spot.name}`);
}

/** Where the task object(s) go: for two objects, the target receptacle already holding the most. */
export function goalReceptacle(w: World): string {
  let best: string | null = null;
  let bestCount = -1;
  for (const [name, n] of deliveredCounts(w)) {
    if (n > bestCount) [best, bestCount] = [name, n];
  }
  if (best === null) throw new Error(`household expert: no ${w.task.target} in the room`);
  return best;
}

/** An instance of the task object to fetch, preferring one already transformed as required. */
function candidate(w: World, exclude: string | null): Item {
  const pool = w.items.filter((o) => o.type === w.task.object && o.in !== null && o.in !== exclude);
  pool.sort((a, b) => Number(hasRequiredState(w, b)) - Number(hasRequiredState(w, a)) || (a.name < b.name ? -1 : 1));
  if (pool.length === 0) throw new Error(`household expert: no ${w.task.object} left to fetch`);
  return pool[0];
}

function fetch(o: Item, w: World): string {
  return approach(w, o.in!, `take ${o.name} from ${o.in}`);
}

/** The expert's next command from this state; null once the task is done. */
export function nextExpertAction(w: World): string | null {
  if (isWon(w)) return null;
  const { type, object, target } = w.task;
  const hand = held(w);
  if (hand && hand.type !== object) return putAway(w, hand);

  if (type === 'look_at_obj_in_light') {
    if (!hand) return fetch(candidate(w, null), w);
    const lamps = w.items.filter((o) => o.type === target && o.in !== null).sort((a, b) => Number(b.on) - Number(a.on));
    if (lamps.length === 0) throw new Error(`household expert: no ${target} in the room`);
    return approach(w, lamps[0].in!, `use ${lamps[0].name}`);
  }

  const goal = goalReceptacle(w);
  if (!hand) return fetch(candidate(w, type === 'pick_two_obj_and_place' ? goal : null), w);
  const transform = transformOf(type);
  if (transform && !hasRequiredState(w, hand)) {
    const appliance = w.receptacles.find((r) => r.type === APPLIANCE[transform]);
    if (!appliance) throw new Error(`household expert: no ${APPLIANCE[transform]} in the room`);
    return w.at === appliance.name ? `${transform} ${hand.name} with ${appliance.name}` : `go to ${appliance.name}`;
  }
  return approach(w, goal, `move ${hand.name} to ${goal}`);
}

/** The expert's whole remaining plan from this state (run on a copy), at most `limit` commands. */
export function expertPlan(w: World, limit = 50): string[] {
  const sim = cloneWorld(w);
  const plan: string[] = [];
  for (let a = nextExpertAction(sim); a !== null && plan.length < limit; a = nextExpertAction(sim)) {
    plan.push(a);
    execute(sim, a);
  }
  return plan;
}
