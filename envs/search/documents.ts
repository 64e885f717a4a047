// The world written out as a Wikipedia-like corpus: passages whose first line is the
// quoted title (the wiki-18 layout Search-R1 uses). People get two passages (early
// life, career) and organisations two (overview, history), so a question may need the
// right passage of an article, and events mention people, places and sponsors in
// passing, so a name alone does not pick out one document.

import type { CorpusDocument } from './jsonl.ts';
import type { World } from './world.ts';

function article(word: string): string {
  return /^[aeiou]/.test(word) ? 'an' : 'a';
}

/** 1234000 -> "1,234,000", without Intl (runtimes ship different ICU data). */
function withCommas(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

const SIBLINGS = ['no siblings', 'one sibling', 'two siblings', 'three siblings', 'four siblings', 'five siblings'];

function passage(title: string, body: string): string {
  return `"${title}"\n${body}`;
}

export function worldPassages(world: World): string[] {
  const out: string[] = [];
  const countryOf = new Map(world.cities.map((c) => [c.name, c.country]));
  for (const c of world.countries) {
    out.push(passage(c.name,
      `${c.name} is a country whose capital is ${c.capital}. Its official language is ${c.language}. ` +
      `The cities of ${c.name} include ${c.cities.slice(0, -1).join(', ')} and ${c.cities[c.cities.length - 1]}.`));
  }
  for (const c of world.cities) {
    const capital = world.countries.find((k) => k.capital === c.name) !== undefined ? ` ${c.name} is the seat of the national government.` : '';
    out.push(passage(c.name,
      `${c.name} is a city in ${c.country}.${capital} ${c.name} lies on the ${c.river} river and has about ${withCommas(c.population)} inhabitants.`));
  }
  for (const o of world.organisations) {
    out.push(passage(o.name,
      `${o.name} is ${article(o.industry)} ${o.industry} company. ${o.name} is headquartered in ${o.headquarters}. ` +
      `${o.name} was founded in ${o.founded} by ${o.founder}.`));
    out.push(passage(o.name,
      `History. In its early years ${o.shortName} opened offices in ${o.offices[0]} and ${o.offices[1]}, ` +
      `and it later expanded across ${countryOf.get(o.offices[0])}.`));
  }
  for (const p of world.people) {
    const marriage = p.spouse === null ? `${p.name} has never married.` : `${p.name} is married to ${p.spouse}.`;
    out.push(passage(p.name,
      `${p.name} (born ${p.born}) is ${article(p.occupation)} ${p.occupation} from ${countryOf.get(p.birthplace)}. ` +
      `${p.name} was born in ${p.birthplace} in ${p.born} and grew up with ${SIBLINGS[p.siblings]}. ${marriage}`));
    out.push(passage(p.name,
      `Career. ${p.name} works for ${p.employer} as ${article(p.occupation)} ${p.occupation}, having joined in ${p.joined}.`));
  }
  for (const e of world.events) {
    out.push(passage(e.name,
      `The ${e.name} took place in ${e.city} in ${e.year}. Speakers included ${e.speakers[0]}, ${e.speakers[1]} and ${e.speakers[2]}. ` +
      `It was sponsored by ${e.sponsor}.`));
  }
  return out;
}

/** The corpus rows, ids numbered from 0 as in wiki-18. */
export function worldCorpus(world: World): CorpusDocument[] {
  return worldPassages(world).map((contents, i) => ({ id: String(i), contents }));
}
