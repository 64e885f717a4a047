// Skill cards for the teacher's privileged context: a hand-written general card and
// one per task type, shipped as markdown next to this file, followed by where the
// task's objects are usually kept. The folder is one of the files the program ships
// with (storage/), so the compiled copy (dist/) and a browser tab read the same files.

import { dirname, join } from '../../src/storage/paths.ts';
import { shippedFile, storage } from '../../src/storage/storage.ts';
import { COMBOS, LAMPS, TASK_TYPES, type TaskType } from './catalog.ts';
import { usualPlaces } from './conventions.ts';
import { keywordTaskTypes } from '../../src/envs/skills_block.ts';

let skillDir: string | null = null;
const cache = new Map<string, string>();

function findSkillDir(): string {
  if (skillDir) return skillDir;
  const marker = shippedFile(join('envs', 'household', 'skills', 'general.md'));
  if (!marker) throw new Error('household: cannot find the skills/ folder (envs/household/skills) among the files this program ships with');
  return (skillDir = dirname(marker));
}

/** One card's markdown: "general" or a task type. */
export function householdSkillCard(name: 'general' | TaskType): string {
  let text = cache.get(name);
  if (text === undefined) {
    const path = join(findSkillDir(), `${name}.md`);
    if (!storage().exists(path)) throw new Error(`household: no skill card ${path}`);
    text = storage().readText(path).trim();
    cache.set(name, text);
  }
  return text;
}

/** Object kinds a task type can ask for (and the lamp, for looking under one). */
function kindsOf(taskType: TaskType): string[] {
  const kinds = new Set(COMBOS.filter((c) => c.taskType === taskType).map((c) => c.object));
  if (taskType === 'look_at_obj_in_light') for (const lamp of Object.keys(LAMPS)) kinds.add(lamp);
  return [...kinds].sort();
}

/**
 * "Where things are usually kept" for the kinds a task type involves, one line per
 * kind ("- mug: coffeemachine, else desk, else sidetable"), read from the worlds'
 * own conventions so the card cannot drift from them.
 */
export function usualPlacesCard(taskType: TaskType): string {
  const lines = kindsOf(taskType).map((kind) => `- ${kind}: ${usualPlaces(kind).join(', else ')}`);
  return ['Where things are usually kept:', ...lines].join('\n');
}

/** The general card, then for each type its card and where its objects are usually kept. */
function cardsFor(types: readonly TaskType[]): string {
  return [householdSkillCard('general'), ...types.flatMap((t) => [householdSkillCard(t), usualPlacesCard(t)])].join('\n\n');
}

/** The skill text for a task: the general card, the card of its type, then where its objects are usually kept. */
export function householdSkills(taskType: string): string {
  if (!(TASK_TYPES as readonly string[]).includes(taskType)) {
    throw new Error(`household: no skill card for task type "${taskType}" (expected one of ${TASK_TYPES.join(', ')})`);
  }
  return cardsFor([taskType as TaskType]);
}

/**
 * The reference's ALFWorld keyword table (skill_mapping.json's task_keywords), in its
 * order, over this project's task types: the reference maps both put tasks to one
 * pick-and-place card, where this project has a card for each.
 */
export const HOUSEHOLD_TASK_KEYWORDS: readonly (readonly [TaskType, readonly string[]])[] = [
  ['look_at_obj_in_light', ['look at', 'light']],
  ['pick_heat_then_place', ['heat']],
  ['pick_cool_then_place', ['cool']],
  ['pick_clean_then_place', ['clean']],
  ['pick_two_obj_and_place', ['put two']],
  ['pick_and_place', ['put']],
];

/** The skill text keyword routing gives a prompt: the general card and the card of every matching type. */
export function householdKeywordSkills(prompt: string): string {
  return cardsFor(keywordTaskTypes(prompt, HOUSEHOLD_TASK_KEYWORDS) as TaskType[]);
}
