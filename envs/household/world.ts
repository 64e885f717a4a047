// The mutable state of one household episode and the lookups every command needs.

import type { Split } from '../../src/envs/types.ts';
import type { RoomType, TaskType } from './catalog.ts';

export interface Receptacle {
  /** "cabinet 4" */
  name: string;
  type: string;
  openable: boolean;
  open: boolean;
}

export interface Item {
  /** "soapbar 1" */
  name: string;
  type: string;
  /** The receptacle it is in/on; null while the agent holds it. */
  in: string | null;
  pickupable: boolean;
  toggleable: boolean;
  /** ALFWorld's isToggled: once used, a lamp stays lit. */
  on: boolean;
  hot: boolean;
  cool: boolean;
  clean: boolean;
}

export interface HouseholdTask {
  type: TaskType;
  /** Object type to act on ("spraybottle"). */
  object: string;
  /** Receptacle type to put it in, or the lamp type for look_at_obj_in_light. */
  target: string;
  /** The sentence shown after "Your task is to: ". */
  sentence: string;
}

export interface World {
  split: Split;
  seed: number;
  room: RoomType;
  layout: string;
  /** In the order the room description lists them. */
  receptacles: Receptacle[];
  items: Item[];
  /** Receptacle the agent stands at; null in the middle of the room. */
  at: string | null;
  /** Name of the held item (at most one). */
  holding: string | null;
  task: HouseholdTask;
}

export function receptacle(w: World, name: string): Receptacle | undefined {
  return w.receptacles.find((r) => r.name === name);
}

export function item(w: World, name: string): Item | undefined {
  return w.items.find((i) => i.name === name);
}

export function itemsIn(w: World, receptacleName: string): Item[] {
  return w.items.filter((i) => i.in === receptacleName);
}

export function held(w: World): Item | undefined {
  return w.holding === null ? undefined : item(w, w.holding);
}

/** Contents are visible (and reachable) unless behind a closed door. */
export function isReachable(r: Receptacle): boolean {
  return !r.openable || r.open;
}

/** "cabinet 10" -> ["cabinet", 10] */
function splitName(name: string): [string, number] {
  const cut = name.lastIndexOf(' ');
  return [name.slice(0, cut), Number(name.slice(cut + 1))];
}

/** ALFWorld lists things by type, and within a type from the highest number down. */
export function displayOrder(a: string, b: string): number {
  const [ta, na] = splitName(a);
  const [tb, nb] = splitName(b);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return nb - na;
}

export function cloneWorld(w: World): World {
  return structuredClone(w);
}
