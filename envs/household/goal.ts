// Goal tests per task type, restated from ALFWorld's PDDL goals.

import { transformOf } from './catalog.ts';
import { held, type Item, type World } from './world.ts';

/** The flag a transform task needs on the delivered object (true when none is needed). */
export function hasRequiredState(w: World, o: Item): boolean {
  const t = transformOf(w.task.type);
  return t === null || o[t === 'heat' ? 'hot' : t === 'cool' ? 'cool' : 'clean'];
}

/** Receptacles of the target type, each with how many finished task objects it holds. */
export function deliveredCounts(w: World): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of w.receptacles) if (r.type === w.task.target) counts.set(r.name, 0);
  for (const o of w.items) {
    if (o.in !== null && counts.has(o.in) && o.type === w.task.object && hasRequiredState(w, o)) {
      counts.set(o.in, counts.get(o.in)! + 1);
    }
  }
  return counts;
}

export function isWon(w: World): boolean {
  const { type, object, target } = w.task;
  if (type === 'look_at_obj_in_light') {
    const hand = held(w);
    return hand?.type === object && w.items.some((o) => o.type === target && o.on && o.in !== null && o.in === w.at);
  }
  const need = type === 'pick_two_obj_and_place' ? 2 : 1;
  for (const n of deliveredCounts(w).values()) if (n >= need) return true;
  return false;
}
