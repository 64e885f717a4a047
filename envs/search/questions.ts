// Single-hop and two-hop questions over the generated world, with their gold answers.
// A question is a template (a chain of one or two relations) applied to a subject.
// Splits: subjects at every fifth position are held out for valid_unseen; the other
// (template, subject) pairs are split one in ten to valid_seen, the rest to train, so
// no question is shared between splits.

import type { Split } from '../../src/envs/types.ts';
import { hash32, Prng } from '../../src/util/random.ts';
import type { QaExample } from './dataset.ts';
import type { World } from './world.ts';

export type Relation = 'born_in' | 'works_for' | 'married_to' | 'founded_year' | 'founded_by' | 'headquartered_in' | 'located_in' | 'capital';
export type EntityKind = 'person' | 'organisation' | 'city' | 'country';
export type QuestionType = 'single_hop' | 'two_hop';

export interface QuestionTemplate {
  type: QuestionType;
  subject: EntityKind;
  relations: readonly Relation[];
  /** The question with {} where the subject's name goes. */
  text: string;
}

export const TEMPLATES: readonly QuestionTemplate[] = [
  { type: 'single_hop', subject: 'person', relations: ['born_in'], text: 'where was {} born?' },
  { type: 'single_hop', subject: 'person', relations: ['works_for'], text: 'which organisation does {} work for?' },
  { type: 'single_hop', subject: 'person', relations: ['married_to'], text: 'who is {} married to?' },
  { type: 'single_hop', subject: 'organisation', relations: ['founded_year'], text: 'in what year was {} founded?' },
  { type: 'single_hop', subject: 'organisation', relations: ['founded_by'], text: 'who founded {}?' },
  { type: 'single_hop', subject: 'organisation', relations: ['headquartered_in'], text: 'in which city is {} headquartered?' },
  { type: 'single_hop', subject: 'city', relations: ['located_in'], text: 'in which country is {} located?' },
  { type: 'single_hop', subject: 'country', relations: ['capital'], text: 'what is the capital of {}?' },
  { type: 'two_hop', subject: 'person', relations: ['born_in', 'located_in'], text: 'in which country was {} born?' },
  { type: 'two_hop', subject: 'person', relations: ['works_for', 'founded_year'], text: 'in what year was the employer of {} founded?' },
  { type: 'two_hop', subject: 'person', relations: ['works_for', 'headquartered_in'], text: 'in which city is the employer of {} headquartered?' },
  { type: 'two_hop', subject: 'person', relations: ['works_for', 'founded_by'], text: 'who founded the organisation that {} works for?' },
  { type: 'two_hop', subject: 'person', relations: ['married_to', 'born_in'], text: 'where was the spouse of {} born?' },
  { type: 'two_hop', subject: 'organisation', relations: ['founded_by', 'born_in'], text: 'where was the founder of {} born?' },
  { type: 'two_hop', subject: 'organisation', relations: ['founded_by', 'married_to'], text: 'who is the spouse of the founder of {}?' },
  { type: 'two_hop', subject: 'organisation', relations: ['headquartered_in', 'located_in'], text: 'in which country is {} headquartered?' },
  { type: 'two_hop', subject: 'city', relations: ['located_in', 'capital'], text: 'what is the capital of the country where {} is located?' },
];

export const QUESTION_TYPES: readonly QuestionType[] = ['single_hop', 'two_hop'];

/** A fact's value and the answers that count as naming it. */
interface Value { name: string; answers: string[] }

function subjects(world: World, kind: EntityKind): string[] {
  switch (kind) {
    case 'person': return world.people.map((p) => p.name);
    case 'organisation': return world.organisations.map((o) => o.name);
    case 'city': return world.cities.map((c) => c.name);
    case 'country': return world.countries.map((c) => c.name);
  }
}

function follow(world: World, relation: Relation, name: string): Value | null {
  const plain = (n: string | undefined | null): Value | null => (n === undefined || n === null ? null : { name: n, answers: [n] });
  const org = (n: string | undefined): Value | null => {
    const o = world.organisations.find((x) => x.name === n);
    return o === undefined ? null : { name: o.name, answers: [o.name, o.shortName] };
  };
  const person = world.people.find((p) => p.name === name);
  const organisation = world.organisations.find((o) => o.name === name);
  switch (relation) {
    case 'born_in': return plain(person?.birthplace);
    case 'works_for': return org(person?.employer);
    case 'married_to': return plain(person?.spouse);
    case 'founded_year': return organisation === undefined ? null : plain(String(organisation.founded));
    case 'founded_by': return plain(organisation?.founder);
    case 'headquartered_in': return plain(organisation?.headquarters);
    case 'located_in': return plain(world.cities.find((c) => c.name === name)?.country);
    case 'capital': return plain(world.countries.find((c) => c.name === name)?.capital);
  }
}

const SPLIT_INDEX: Record<Split, number> = { train: 0, valid_seen: 1, valid_unseen: 2 };

function splitOf(templateIndex: number, subjectIndex: number): Split {
  if (subjectIndex % 5 === 4) return 'valid_unseen';
  return hash32(templateIndex * 65537 + subjectIndex) % 10 === 0 ? 'valid_seen' : 'train';
}

export interface GeneratedQuestion extends QaExample {
  type: QuestionType;
}

/** The question for one task; the same (split, seed) gives the same question everywhere. */
export function drawQuestion(world: World, split: Split, seed: number): GeneratedQuestion {
  const rng = new Prng(seed * 3 + SPLIT_INDEX[split]);
  const type = rng.pick(QUESTION_TYPES);
  const candidates = TEMPLATES.map((t, i) => [t, i] as const).filter(([t]) => t.type === type);
  for (;;) {
    const [template, templateIndex] = rng.pick(candidates);
    const names = subjects(world, template.subject);
    const subjectIndex = rng.int(0, names.length - 1);
    if (splitOf(templateIndex, subjectIndex) !== split) continue;
    let value: Value | null = { name: names[subjectIndex], answers: [] };
    for (const r of template.relations) value = value === null ? null : follow(world, r, value.name);
    if (value === null) continue;
    return { question: template.text.replace('{}', names[subjectIndex]), golden_answers: value.answers, data_source: type, type };
  }
}

const NAME = '[A-Z][a-z]+(?: [A-Z][a-z]+)*';

function templatePattern(text: string): RegExp {
  const [before, after] = text.split('{}').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${before}(${NAME})${after}$`);
}

const PATTERNS = TEMPLATES.map((t) => ({ template: t, pattern: templatePattern(t.text) }));

/** Reads a generated question back into its template and subject (null for any other question). */
export function parseQuestion(question: string): { template: QuestionTemplate; subject: string } | null {
  for (const { template, pattern } of PATTERNS) {
    const m = pattern.exec(question.trim());
    if (m !== null) return { template, subject: m[1] };
  }
  return null;
}
