// ALFWorld's feedback strings (alfworld/data/alfred.twl2), rendered from world state.

import type { TaskType } from './catalog.ts';
import { displayOrder, itemsIn, type Item, type Receptacle, type World } from './world.ts';

export const NOTHING_HAPPENS = 'Nothing happens.';

export const WELCOME = '-= Welcome to TextWorld, ALFRED! =-';

/** What `help` answers: the commands and what they take. */
export const HELP_TEXT = [
  'Available commands:',
  '  look: look around where you are',
  '  inventory: check what you are carrying',
  '  go to (receptacle): move to a receptacle',
  '  open (receptacle): open a receptacle',
  '  close (receptacle): close a receptacle',
  '  take (object) from (receptacle): take an object from a receptacle',
  '  move (object) to (receptacle): place the object you carry in or on a receptacle',
  '  examine (something): examine a receptacle or an object',
  '  use (object): use an object',
  '  heat (object) with (receptacle): heat an object using a receptacle',
  '  clean (object) with (receptacle): clean an object using a receptacle',
  '  cool (object) with (receptacle): cool an object using a receptacle',
].join('\n');

/** TextWorld's list: "nothing", "a x 1", "a x 1, and a y 2", "a x 1, a y 2, and a z 1" (always "a", as ALFWorld prints it). */
export function listing(names: readonly string[]): string {
  if (names.length === 0) return 'nothing';
  const parts = [...names].sort(displayOrder).map((n) => `a ${n}`);
  if (parts.length === 1) return parts[0];
  return `${parts.slice(0, -1).join(', ')}, and ${parts[parts.length - 1]}`;
}

/** examineReceptacle.feedback: what the agent sees at a receptacle. */
export function describeReceptacle(w: World, r: Receptacle): string {
  const contents = listing(itemsIn(w, r.name).map((i) => i.name));
  if (r.openable) return r.open ? `The ${r.name} is open. In it, you see ${contents}.` : `The ${r.name} is closed.`;
  return `On the ${r.name}, you see ${contents}.`;
}

export function arriveText(w: World, r: Receptacle): string {
  return `You arrive at ${r.name}. ${describeReceptacle(w, r)}`;
}

export function openText(w: World, r: Receptacle): string {
  return `You open the ${r.name}. ${describeReceptacle(w, r)}`;
}

export function lookText(w: World): string {
  if (w.at !== null) return `You are facing the ${w.at}. Next to it, you see nothing.`;
  return `You are in the middle of a room. Looking quickly around you, you see ${listing(w.receptacles.map((r) => r.name))}.`;
}

export function introText(w: World): string {
  return `${WELCOME}\n\n${lookText(w)}\n\nYour task is to: ${w.task.sentence}`;
}

export function inventoryText(holding: Item | undefined): string {
  return holding ? `You are carrying: a ${holding.name}.` : 'You are not carrying anything.';
}

/** examineObject.feedback without the sliced variants (nothing here can be sliced). */
export function examineItemText(o: Item): string {
  if (o.clean && o.hot) return `This is a hot and clean ${o.name}.`;
  if (o.clean && o.cool) return `This is a cool and clean ${o.name}.`;
  if (o.hot) return `This is a hot ${o.name}.`;
  if (o.clean) return `This is a clean ${o.name}.`;
  if (o.cool) return `This is a cold ${o.name}.`;
  if (o.toggleable) return `This ${o.name} is ${o.on ? 'on' : 'off'}.`;
  return `There's nothing special about ${o.name}.`;
}

/** The two ALFWorld goal templates per task type (ALFWorld paper, table 7). */
const TEMPLATES: Record<TaskType, readonly [string, string]> = {
  pick_and_place: ['put a {obj} in {recep}.', 'put some {obj} on {recep}.'],
  pick_two_obj_and_place: ['put two {obj} in {recep}.', 'find two {obj} and put them in {recep}.'],
  look_at_obj_in_light: ['look at {obj} under the {recep}.', 'examine the {obj} with the {recep}.'],
  pick_heat_then_place: ['put a hot {obj} in {recep}.', 'heat some {obj} and put it in {recep}.'],
  pick_cool_then_place: ['put a cool {obj} in {recep}.', 'cool some {obj} and put it in {recep}.'],
  pick_clean_then_place: ['put a clean {obj} in {recep}.', 'clean some {obj} and put it in {recep}.'],
};

export function taskSentence(type: TaskType, object: string, target: string, variant: 0 | 1): string {
  return TEMPLATES[type][variant].replace('{obj}', object).replace('{recep}', target);
}
