// What a household world can contain: receptacle kinds, object kinds (where each can
// be placed, which transformations apply), room layouts, and the task combinations
// each split draws from. Names are ALFWorld's lower-cased class names.

import type { Split } from '../../src/envs/types.ts';
import { hash32 } from '../../src/util/random.ts';

export type TaskType =
  | 'pick_and_place'
  | 'pick_two_obj_and_place'
  | 'look_at_obj_in_light'
  | 'pick_heat_then_place'
  | 'pick_cool_then_place'
  | 'pick_clean_then_place';

export const TASK_TYPES: readonly TaskType[] = [
  'pick_and_place',
  'pick_two_obj_and_place',
  'look_at_obj_in_light',
  'pick_heat_then_place',
  'pick_cool_then_place',
  'pick_clean_then_place',
];

export type RoomType = 'kitchen' | 'bathroom' | 'bedroom' | 'livingroom';

/** Receptacles with a door; they start closed and hide their contents until opened. */
export const OPENABLE: ReadonlySet<string> = new Set(['cabinet', 'drawer', 'fridge', 'microwave', 'safe']);

/** The appliance each transformation needs (ALFWorld: microwave, fridge, sink basin). */
export const APPLIANCE = { heat: 'microwave', cool: 'fridge', clean: 'sinkbasin' } as const;

export interface ObjectKind {
  rooms: readonly RoomType[];
  /** Receptacle types the object may start in and may be put into (ALFWorld's canContain). */
  places: readonly string[];
  heat?: boolean;
  cool?: boolean;
  clean?: boolean;
}

const K: RoomType = 'kitchen';
const B: RoomType = 'bathroom';
const BED: RoomType = 'bedroom';
const L: RoomType = 'livingroom';

const PRODUCE = ['countertop', 'diningtable', 'fridge', 'sinkbasin', 'garbagecan', 'microwave'];
const CUTLERY = ['countertop', 'diningtable', 'drawer', 'sinkbasin'];
const COOKWARE = ['countertop', 'stoveburner', 'cabinet', 'sinkbasin', 'fridge', 'diningtable'];
const DESK_THINGS = ['desk', 'drawer', 'dresser', 'shelf', 'sidetable', 'garbagecan'];
const LIVING_SMALL = ['coffeetable', 'diningtable', 'sofa', 'armchair', 'sidetable', 'drawer', 'dresser', 'ottoman', 'tvstand', 'shelf'];
const DISPLAY = ['coffeetable', 'diningtable', 'shelf', 'sidetable', 'tvstand', 'dresser'];

export const OBJECTS: Readonly<Record<string, ObjectKind>> = {
  apple: { rooms: [K], places: PRODUCE, heat: true, cool: true, clean: true },
  egg: { rooms: [K], places: PRODUCE, heat: true, cool: true, clean: true },
  potato: { rooms: [K], places: PRODUCE, heat: true, cool: true, clean: true },
  tomato: { rooms: [K], places: PRODUCE, heat: true, cool: true, clean: true },
  lettuce: { rooms: [K], places: ['countertop', 'diningtable', 'fridge', 'sinkbasin', 'garbagecan'], cool: true, clean: true },
  bread: { rooms: [K], places: ['countertop', 'diningtable', 'fridge', 'cabinet', 'microwave'], cool: true },
  mug: {
    rooms: [K, BED],
    places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'sinkbasin', 'coffeemachine', 'microwave', 'fridge', 'desk', 'sidetable'],
    heat: true, cool: true, clean: true,
  },
  cup: { rooms: [K], places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'sinkbasin', 'microwave', 'fridge'], heat: true, cool: true, clean: true },
  plate: {
    rooms: [K, L],
    places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'sinkbasin', 'fridge', 'microwave', 'coffeetable', 'sidetable'],
    heat: true, cool: true, clean: true,
  },
  bowl: {
    rooms: [K, BED, L],
    places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'sinkbasin', 'fridge', 'microwave', 'desk', 'sidetable', 'coffeetable'],
    cool: true, clean: true,
  },
  pan: { rooms: [K], places: COOKWARE, cool: true, clean: true },
  pot: { rooms: [K], places: COOKWARE, cool: true, clean: true },
  kettle: { rooms: [K], places: ['countertop', 'stoveburner', 'cabinet', 'sinkbasin', 'diningtable'], clean: true },
  fork: { rooms: [K], places: CUTLERY, clean: true },
  spoon: { rooms: [K], places: CUTLERY, clean: true },
  knife: { rooms: [K], places: CUTLERY, clean: true },
  butterknife: { rooms: [K], places: CUTLERY, clean: true },
  spatula: { rooms: [K], places: CUTLERY, clean: true },
  ladle: { rooms: [K], places: CUTLERY, clean: true },
  dishsponge: { rooms: [K, B], places: ['countertop', 'sinkbasin', 'cabinet', 'drawer', 'shelf'], clean: true },
  saltshaker: { rooms: [K], places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'drawer'] },
  peppershaker: { rooms: [K], places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'drawer'] },
  winebottle: { rooms: [K], places: ['countertop', 'diningtable', 'fridge', 'cabinet', 'shelf'], cool: true },
  glassbottle: { rooms: [K], places: ['countertop', 'diningtable', 'cabinet', 'shelf', 'fridge', 'garbagecan'] },
  soapbottle: { rooms: [K, B], places: ['countertop', 'cabinet', 'shelf', 'toilet', 'garbagecan'] },
  soapbar: { rooms: [B], places: ['countertop', 'bathtubbasin', 'sinkbasin', 'toilet', 'cabinet', 'shelf', 'garbagecan', 'cart'], clean: true },
  cloth: {
    rooms: [B, BED],
    places: ['countertop', 'bathtubbasin', 'sinkbasin', 'cabinet', 'drawer', 'shelf', 'toilet', 'garbagecan', 'cart', 'dresser', 'laundryhamper'],
    clean: true,
  },
  spraybottle: { rooms: [B], places: ['countertop', 'cabinet', 'shelf', 'toilet', 'garbagecan', 'cart'] },
  toiletpaper: { rooms: [B], places: ['countertop', 'cabinet', 'shelf', 'toilet', 'toiletpaperhanger', 'garbagecan', 'drawer', 'cart'] },
  candle: { rooms: [B], places: ['countertop', 'cabinet', 'shelf', 'toilet', 'drawer', 'cart', 'dresser'] },
  handtowel: { rooms: [B], places: ['handtowelholder', 'countertop', 'cabinet'] },
  towel: { rooms: [B], places: ['towelholder', 'cabinet', 'shelf'] },
  tissuebox: { rooms: [B, L], places: ['countertop', 'shelf', 'toilet', 'cabinet', 'coffeetable', 'sidetable', 'dresser'] },
  alarmclock: { rooms: [BED], places: ['desk', 'dresser', 'sidetable', 'shelf'] },
  book: { rooms: [BED, L], places: ['bed', 'desk', 'dresser', 'sidetable', 'shelf', 'drawer', 'sofa', 'coffeetable'] },
  cd: { rooms: [BED], places: ['desk', 'drawer', 'dresser', 'shelf', 'sidetable', 'garbagecan', 'safe'] },
  cellphone: { rooms: [BED, L], places: ['bed', 'desk', 'drawer', 'dresser', 'sidetable', 'shelf', 'safe', 'sofa', 'armchair', 'coffeetable'] },
  creditcard: { rooms: [BED, L], places: ['desk', 'drawer', 'dresser', 'shelf', 'sidetable', 'armchair', 'coffeetable', 'diningtable', 'sofa'] },
  keychain: { rooms: [BED, L], places: ['desk', 'drawer', 'dresser', 'shelf', 'sidetable', 'safe', 'armchair', 'coffeetable', 'sofa', 'ottoman'] },
  laptop: { rooms: [BED, L], places: ['bed', 'desk', 'dresser', 'sidetable', 'sofa', 'armchair', 'coffeetable', 'diningtable', 'ottoman'] },
  pen: { rooms: [BED], places: DESK_THINGS },
  pencil: { rooms: [BED], places: DESK_THINGS },
  pillow: { rooms: [BED, L], places: ['bed', 'armchair', 'sofa', 'ottoman'] },
  teddybear: { rooms: [BED], places: ['bed', 'shelf', 'dresser', 'armchair'] },
  box: { rooms: [L], places: ['coffeetable', 'diningtable', 'sofa', 'armchair', 'sidetable', 'shelf', 'tvstand', 'dresser', 'ottoman'] },
  remotecontrol: { rooms: [L], places: LIVING_SMALL },
  newspaper: { rooms: [L], places: ['sofa', 'armchair', 'coffeetable', 'diningtable', 'ottoman', 'sidetable', 'tvstand', 'garbagecan'] },
  statue: { rooms: [L], places: DISPLAY },
  vase: { rooms: [L], places: DISPLAY },
  watch: { rooms: [L], places: [...DISPLAY, 'drawer'] },
};

/** Light sources for look_at_obj_in_light: toggleable, not pickupable, one per bedroom and living room. */
export const LAMPS: Readonly<Record<string, { places: readonly string[] }>> = {
  desklamp: { places: ['desk', 'sidetable', 'dresser', 'shelf'] },
};

export const LAMP_ROOMS: readonly RoomType[] = [BED, L];

export interface Layout {
  id: string;
  room: RoomType;
  /** [receptacle type, min count, max count]; every listed type is present (min >= 1). */
  receptacles: readonly (readonly [string, number, number])[];
  /** Held out of train and valid_seen; only valid_unseen uses it. */
  unseen: boolean;
}

export const LAYOUTS: readonly Layout[] = [
  {
    id: 'kitchen_a', room: K, unseen: false,
    receptacles: [['cabinet', 3, 6], ['coffeemachine', 1, 1], ['countertop', 1, 2], ['diningtable', 1, 1], ['drawer', 1, 3],
      ['fridge', 1, 1], ['garbagecan', 1, 1], ['microwave', 1, 1], ['sinkbasin', 1, 1], ['stoveburner', 2, 4], ['toaster', 1, 1]],
  },
  {
    id: 'kitchen_b', room: K, unseen: false,
    receptacles: [['cabinet', 6, 10], ['coffeemachine', 1, 1], ['countertop', 2, 3], ['drawer', 2, 4], ['fridge', 1, 1],
      ['garbagecan', 1, 1], ['microwave', 1, 1], ['shelf', 1, 3], ['sinkbasin', 1, 1], ['stoveburner', 4, 4], ['toaster', 1, 1]],
  },
  {
    id: 'kitchen_c', room: K, unseen: true,
    receptacles: [['cabinet', 8, 13], ['coffeemachine', 1, 1], ['countertop', 1, 1], ['diningtable', 1, 2], ['drawer', 3, 6],
      ['fridge', 1, 1], ['garbagecan', 1, 1], ['microwave', 1, 1], ['shelf', 2, 3], ['sinkbasin', 1, 2], ['stoveburner', 4, 4], ['toaster', 1, 1]],
  },
  {
    id: 'bathroom_a', room: B, unseen: false,
    receptacles: [['bathtubbasin', 1, 1], ['cabinet', 2, 4], ['countertop', 1, 1], ['garbagecan', 1, 1], ['handtowelholder', 1, 1],
      ['sinkbasin', 1, 2], ['toilet', 1, 1], ['toiletpaperhanger', 1, 1], ['towelholder', 1, 1]],
  },
  {
    id: 'bathroom_b', room: B, unseen: false,
    receptacles: [['cabinet', 3, 4], ['countertop', 1, 1], ['drawer', 1, 4], ['garbagecan', 1, 1], ['handtowelholder', 1, 2],
      ['shelf', 1, 3], ['sinkbasin', 1, 2], ['toilet', 1, 1], ['toiletpaperhanger', 1, 1], ['towelholder', 1, 1]],
  },
  {
    id: 'bathroom_c', room: B, unseen: true,
    receptacles: [['bathtubbasin', 1, 1], ['cart', 1, 1], ['countertop', 1, 1], ['dresser', 1, 1], ['garbagecan', 1, 1], ['handtowelholder', 1, 2],
      ['shelf', 2, 4], ['sinkbasin', 1, 1], ['toilet', 1, 1], ['toiletpaperhanger', 1, 1], ['towelholder', 1, 2]],
  },
  {
    id: 'bedroom_a', room: BED, unseen: false,
    receptacles: [['bed', 1, 1], ['desk', 1, 1], ['drawer', 2, 5], ['garbagecan', 1, 1], ['shelf', 2, 4], ['sidetable', 1, 2]],
  },
  {
    id: 'bedroom_b', room: BED, unseen: false,
    receptacles: [['bed', 1, 1], ['drawer', 3, 8], ['dresser', 1, 1], ['garbagecan', 1, 1], ['laundryhamper', 1, 1], ['shelf', 3, 6], ['sidetable', 1, 2]],
  },
  {
    id: 'bedroom_c', room: BED, unseen: true,
    receptacles: [['armchair', 1, 1], ['bed', 1, 1], ['desk', 1, 2], ['drawer', 2, 4], ['dresser', 1, 1], ['garbagecan', 1, 1],
      ['safe', 1, 1], ['shelf', 2, 4], ['sidetable', 1, 1]],
  },
  {
    id: 'livingroom_a', room: L, unseen: false,
    receptacles: [['armchair', 1, 1], ['coffeetable', 1, 1], ['drawer', 1, 4], ['garbagecan', 1, 1], ['shelf', 1, 4], ['sidetable', 1, 2],
      ['sofa', 1, 1], ['tvstand', 1, 1]],
  },
  {
    id: 'livingroom_b', room: L, unseen: false,
    receptacles: [['armchair', 1, 2], ['cabinet', 2, 4], ['coffeetable', 1, 1], ['diningtable', 1, 1], ['drawer', 1, 3], ['dresser', 1, 1],
      ['garbagecan', 1, 1], ['sidetable', 1, 2], ['sofa', 1, 1]],
  },
  {
    id: 'livingroom_c', room: L, unseen: true,
    receptacles: [['armchair', 1, 1], ['coffeetable', 1, 2], ['diningtable', 1, 1], ['drawer', 2, 6], ['dresser', 1, 1], ['garbagecan', 1, 1],
      ['ottoman', 1, 1], ['shelf', 2, 5], ['sidetable', 1, 1], ['sofa', 1, 1], ['tvstand', 1, 1]],
  },
];

/** A task family instance: which object, and where it goes (a receptacle type, or the lamp type). */
export interface Combo {
  taskType: TaskType;
  object: string;
  target: string;
  /** Whether valid_unseen alone draws it. */
  unseen: boolean;
}

const TRANSFORM: Partial<Record<TaskType, 'heat' | 'cool' | 'clean'>> = {
  pick_heat_then_place: 'heat',
  pick_cool_then_place: 'cool',
  pick_clean_then_place: 'clean',
};

export function transformOf(t: TaskType): 'heat' | 'cool' | 'clean' | null {
  return TRANSFORM[t] ?? null;
}

export function layoutTypes(layout: Layout): Set<string> {
  return new Set(layout.receptacles.map(([t]) => t));
}

/**
 * Whether a layout can host a combo: the target exists, the appliance exists, and the
 * object has somewhere to start that does not already satisfy the goal.
 */
export function layoutFits(layout: Layout, combo: Combo): boolean {
  const kind = OBJECTS[combo.object];
  if (!kind.rooms.includes(layout.room)) return false;
  const types = layoutTypes(layout);
  if (combo.taskType === 'look_at_obj_in_light') {
    return LAMP_ROOMS.includes(layout.room) && LAMPS[combo.target].places.some((p) => types.has(p)) && kind.places.some((p) => types.has(p));
  }
  if (!types.has(combo.target)) return false;
  const transform = transformOf(combo.taskType);
  if (transform && !types.has(APPLIANCE[transform])) return false;
  return startPlaces(combo, types).length > 0;
}

/** Receptacle types an instance of the task object may start in. */
export function startPlaces(combo: Combo, types: ReadonlySet<string>): string[] {
  const simple = combo.taskType === 'pick_and_place' || combo.taskType === 'pick_two_obj_and_place';
  return OBJECTS[combo.object].places.filter((p) => types.has(p) && !(simple && p === combo.target));
}

/** Targets no task asks for: the appliance of a transform task, and the bin for anything transformed. */
function targetAllowed(t: TaskType, target: string): boolean {
  const transform = transformOf(t);
  if (!transform) return true;
  if (target === 'garbagecan') return false;
  if (transform === 'clean') return target !== 'sinkbasin' && target !== 'bathtubbasin';
  return target !== APPLIANCE[transform];
}

/** A fixed fifth of the combinations is held out for valid_unseen, by a hash of its name. */
function heldOut(t: TaskType, object: string, target: string): boolean {
  let h = 2166136261;
  for (const ch of `${t}|${object}|${target}`) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
  return hash32(h) % 5 === 0;
}

function buildCombos(): Combo[] {
  const out: Combo[] = [];
  for (const taskType of TASK_TYPES) {
    for (const [object, kind] of Object.entries(OBJECTS)) {
      const transform = transformOf(taskType);
      if (transform && !kind[transform]) continue;
      const targets = taskType === 'look_at_obj_in_light' ? Object.keys(LAMPS) : kind.places.filter((p) => targetAllowed(taskType, p));
      for (const target of targets) {
        const combo: Combo = { taskType, object, target, unseen: heldOut(taskType, object, target) };
        if (LAYOUTS.some((l) => layoutFits(l, combo))) out.push(combo);
      }
    }
  }
  return out;
}

export const COMBOS: readonly Combo[] = buildCombos();

export function splitUsesUnseen(split: Split): boolean {
  return split === 'valid_unseen';
}

/** Layouts a split may use. */
export function splitLayouts(split: Split): Layout[] {
  return LAYOUTS.filter((l) => l.unseen === splitUsesUnseen(split));
}

/** Combinations a split draws from when no explicit task is given: feasible in one of its layouts. */
export function splitCombos(split: Split, taskType: TaskType): Combo[] {
  const layouts = splitLayouts(split);
  return COMBOS.filter((c) => c.taskType === taskType && c.unseen === splitUsesUnseen(split) && layouts.some((l) => layoutFits(l, c)));
}
