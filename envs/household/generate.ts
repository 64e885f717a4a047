// Procedural worlds: (split, seed) -> one room, its receptacles, objects and a task.
// Each split owns a disjoint range of world ids, and valid_unseen draws only room
// layouts and task combinations that train and valid_seen never use.

import { SPLITS, type Split } from '../../src/envs/types.ts';
import { EnvInputError } from '../errors.ts';
import { Prng } from '../../src/util/random.ts';
import {
  COMBOS, LAMP_ROOMS, LAMPS, layoutFits, layoutTypes, OBJECTS, OPENABLE, splitCombos, splitLayouts, startPlaces, TASK_TYPES,
  type Combo, type TaskType,
} from './catalog.ts';
import { USUAL_PLACE_SHARE, usualPlaceAmong } from './conventions.ts';
import { taskSentence } from './text.ts';
import { displayOrder, type Item, type Receptacle, type World } from './world.ts';

/** Seeds per split; world id = split base + seed, so the splits never share a world. */
export const SEEDS_PER_SPLIT = 1_000_000_000;

const SPLIT_BASE: Record<Split, number> = { train: 0, valid_seen: SEEDS_PER_SPLIT, valid_unseen: 2 * SEEDS_PER_SPLIT };

/** An explicit task: any subset of the fields; the seed draws the rest. */
export interface TaskRequest {
  task_type?: TaskType;
  object?: string;
  target?: string;
}

const REQUEST_KEYS = ['task_type', 'object', 'target'] as const;

export function parseTaskRequest(task: unknown): TaskRequest | null {
  if (task === null || task === undefined) return null;
  if (typeof task !== 'object' || Array.isArray(task)) {
    throw new EnvInputError('household: "task" must be an object {task_type?, object?, target?} or null');
  }
  const req: TaskRequest = {};
  for (const [key, value] of Object.entries(task)) {
    if (!(REQUEST_KEYS as readonly string[]).includes(key)) {
      throw new EnvInputError(`household: unknown field "task.${key}" (expected ${REQUEST_KEYS.join(', ')})`);
    }
    if (typeof value !== 'string') throw new EnvInputError(`household: "task.${key}" must be a string`);
  }
  const t = task as Record<string, string>;
  if (t.task_type !== undefined) {
    if (!(TASK_TYPES as readonly string[]).includes(t.task_type)) {
      throw new EnvInputError(`household: unknown task.task_type "${t.task_type}" (expected one of ${TASK_TYPES.join(', ')})`);
    }
    req.task_type = t.task_type as TaskType;
  }
  if (t.object !== undefined) {
    if (!(t.object in OBJECTS)) throw new EnvInputError(`household: unknown task.object "${t.object}"`);
    req.object = t.object;
  }
  if (t.target !== undefined) req.target = t.target;
  return req;
}

function checkSeed(split: Split, seed: number): void {
  if (!SPLITS.includes(split)) throw new EnvInputError(`household: unknown split "${split}" (expected one of ${SPLITS.join(', ')})`);
  if (!Number.isInteger(seed) || seed < 0 || seed >= SEEDS_PER_SPLIT) {
    throw new EnvInputError(`household: seed must be an integer in [0, ${SEEDS_PER_SPLIT}), got ${seed}`);
  }
}

function chooseCombo(rng: Prng, split: Split, req: TaskRequest | null): Combo {
  if (req === null || (req.object === undefined && req.target === undefined)) {
    const taskType = req?.task_type ?? rng.pick(TASK_TYPES);
    return rng.pick(splitCombos(split, taskType));
  }
  // An explicit object or target may name a combination held out of this split: honour it.
  const layouts = splitLayouts(split);
  const fits = COMBOS.filter(
    (c) =>
      (req.task_type === undefined || c.taskType === req.task_type) &&
      (req.object === undefined || c.object === req.object) &&
      (req.target === undefined || c.target === req.target) &&
      layouts.some((l) => layoutFits(l, c)),
  );
  if (fits.length === 0) {
    throw new EnvInputError(`household: no ${split} room can host task ${JSON.stringify(req)}`);
  }
  return rng.pick(fits);
}

export function generateWorld(split: Split, seed: number, task?: unknown): World {
  checkSeed(split, seed);
  const req = parseTaskRequest(task);
  const rng = new Prng(SPLIT_BASE[split] + seed);
  const combo = chooseCombo(rng, split, req);
  const layout = rng.pick(splitLayouts(split).filter((l) => layoutFits(l, combo)));
  const types = layoutTypes(layout);

  const receptacles: Receptacle[] = [];
  for (const [type, lo, hi] of layout.receptacles) {
    const n = rng.int(lo, hi);
    for (let i = 1; i <= n; i++) receptacles.push({ name: `${type} ${i}`, type, openable: OPENABLE.has(type), open: false });
  }
  receptacles.sort((a, b) => displayOrder(a.name, b.name));

  const items: Item[] = [];
  const numbers = new Map<string, number>();
  // Most copies of a kind start at its usual place (conventions.ts), the rest anywhere it may start.
  const place = (type: string, places: readonly string[], lamp = false): void => {
    const usual = usualPlaceAmong(type, places);
    const at = usual !== null && rng.next() < USUAL_PLACE_SHARE ? [usual] : places;
    const where = rng.pick(receptacles.filter((r) => at.includes(r.type)));
    const n = (numbers.get(type) ?? 0) + 1;
    numbers.set(type, n);
    items.push({
      name: `${type} ${n}`, type, in: where.name, pickupable: !lamp, toggleable: lamp, on: false, hot: false, cool: false, clean: false,
    });
  };

  const starts = startPlaces(combo, types);
  const copies = combo.taskType === 'pick_two_obj_and_place' ? rng.int(2, 3) : rng.int(1, 2);
  for (let i = 0; i < copies; i++) place(combo.object, starts);

  if (LAMP_ROOMS.includes(layout.room)) {
    const lamp = combo.taskType === 'look_at_obj_in_light' ? combo.target : 'desklamp';
    place(lamp, LAMPS[lamp].places.filter((p) => types.has(p)), true);
  }

  const others = Object.entries(OBJECTS)
    .filter(([type, kind]) => type !== combo.object && kind.rooms.includes(layout.room) && kind.places.some((p) => types.has(p)))
    .map(([type]) => type);
  for (const type of rng.shuffle(others).slice(0, rng.int(5, 8))) {
    const places = OBJECTS[type].places.filter((p) => types.has(p));
    const n = rng.int(1, 3);
    for (let i = 0; i < n; i++) place(type, places);
  }

  return {
    split,
    seed,
    room: layout.room,
    layout: layout.id,
    receptacles,
    items,
    at: null,
    holding: null,
    task: {
      type: combo.taskType,
      object: combo.object,
      target: combo.target,
      sentence: taskSentence(combo.taskType, combo.object, combo.target, rng.int(0, 1) as 0 | 1),
    },
  };
}
