// Hand-written skill cards for the teacher's privileged context: a general card plus
// one per task type, shipped as markdown next to this file. The folder is found by
// walking up from this module so the compiled copy (dist/) reads the same files.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TASK_TYPES, type TaskType } from './catalog.ts';

let skillDir: string | null = null;
const cache = new Map<string, string>();

function findSkillDir(): string {
  if (skillDir) return skillDir;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    for (const candidate of [join(dir, 'skills'), join(dir, 'envs', 'household', 'skills')]) {
      if (existsSync(join(candidate, 'general.md'))) return (skillDir = candidate);
    }
    dir = dirname(dir);
  }
  throw new Error(`household: cannot find the skills/ folder above ${fileURLToPath(import.meta.url)}`);
}

/** One card's markdown: "general" or a task type. */
export function householdSkillCard(name: 'general' | TaskType): string {
  let text = cache.get(name);
  if (text === undefined) {
    const path = join(findSkillDir(), `${name}.md`);
    if (!existsSync(path)) throw new Error(`household: no skill card ${path}`);
    text = readFileSync(path, 'utf8').trim();
    cache.set(name, text);
  }
  return text;
}

/** The skill text for a task: the general card followed by the card of its type. */
export function householdSkills(taskType: string): string {
  if (!(TASK_TYPES as readonly string[]).includes(taskType)) {
    throw new Error(`household: no skill card for task type "${taskType}" (expected one of ${TASK_TYPES.join(', ')})`);
  }
  return `${householdSkillCard('general')}\n\n${householdSkillCard(taskType as TaskType)}`;
}
