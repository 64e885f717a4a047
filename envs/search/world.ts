// A seeded world of fictional countries, cities, organisations and people, with the
// facts the questions ask about. Names are built from syllables and never repeat a
// word across entities (people may share a first name, as real people do), so a
// question's entity is findable by name and nothing in a real corpus leaks in.

import { Prng } from '../../src/util/random.ts';

export interface Country { name: string; capital: string; language: string; cities: string[] }
export interface City { name: string; country: string; river: string; population: number }
export interface Organisation { name: string; shortName: string; industry: string; founded: number; founder: string; headquarters: string; offices: string[] }
export interface Person { name: string; born: number; birthplace: string; occupation: string; employer: string; joined: number; spouse: string | null; siblings: number }
export interface WorldEvent { name: string; city: string; year: number; speakers: string[]; sponsor: string }

export interface World {
  seed: number;
  countries: Country[];
  cities: City[];
  organisations: Organisation[];
  people: Person[];
  events: WorldEvent[];
}

export const WORLD_SEED = 1729;

const ONSETS = ['b', 'br', 'c', 'd', 'dr', 'f', 'g', 'gr', 'h', 'k', 'l', 'm', 'n', 'p', 'r', 's', 'st', 't', 'th', 'tr', 'v', 'w', 'z', 'qu'];
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'a', 'e', 'o', 'ai', 'ea', 'ou'];
const CODAS = ['', '', 'n', 'r', 'l', 's', 'th', 'nd', 'rk', 'm', 'v', 'sh'];
const CITY_ENDINGS = ['holm', 'ford', 'mora', 'vik', 'dale', 'port', 'stad', 'ton', 'bury', 'wick'];
const COUNTRY_ENDINGS = ['ia', 'land', 'ora', 'essa', 'istan'];
const RIVERS_ENDINGS = ['wyn', 'ava', 'rin', 'ell'];
const OCCUPATIONS = ['engineer', 'architect', 'chemist', 'journalist', 'painter', 'economist', 'surgeon', 'teacher', 'pilot', 'composer', 'botanist', 'lawyer'];
const INDUSTRIES: readonly [string, string][] = [
  ['software', 'Systems'], ['shipping', 'Freight'], ['textile', 'Textiles'], ['food', 'Foods'], ['pharmaceutical', 'Pharma'],
  ['robotics', 'Robotics'], ['publishing', 'Press'], ['banking', 'Bank'], ['energy', 'Energy'], ['furniture', 'Furnishings'],
];
const EVENT_KINDS = ['Trade Fair', 'Film Festival', 'Science Summit', 'Marathon', 'Music Festival', 'Book Fair'];

const SIZES = { countries: 12, citiesPerCountry: 5, organisations: 100, people: 400, firstNames: 140, events: 150 };

class NameMaker {
  private readonly used = new Set<string>();

  constructor(private readonly rng: Prng) {}

  private syllable(): string {
    return this.rng.pick(ONSETS) + this.rng.pick(VOWELS) + this.rng.pick(CODAS);
  }

  /** A fresh capitalised word of `syllables` syllables plus an optional ending. */
  word(syllables: number, endings: readonly string[] = ['']): string {
    for (;;) {
      let w = '';
      for (let i = 0; i < syllables; i++) w += this.syllable();
      w += this.rng.pick(endings);
      if (w.length < 4 || w.length > 12 || this.used.has(w)) continue;
      this.used.add(w);
      return w[0].toUpperCase() + w.slice(1);
    }
  }
}

export function generateWorld(seed = WORLD_SEED): World {
  const rng = new Prng(seed);
  const names = new NameMaker(rng);
  const countries: Country[] = [];
  const cities: City[] = [];
  for (let c = 0; c < SIZES.countries; c++) {
    const stem = names.word(2);
    const country: Country = { name: stem + rng.pick(COUNTRY_ENDINGS), capital: '', language: `${stem}ic`, cities: [] };
    for (let i = 0; i < SIZES.citiesPerCountry; i++) {
      const city: City = { name: names.word(rng.int(1, 2), CITY_ENDINGS), country: country.name, river: names.word(1, RIVERS_ENDINGS), population: rng.int(20, 2000) * 1000 };
      country.cities.push(city.name);
      cities.push(city);
    }
    country.capital = rng.pick(country.cities);
    countries.push(country);
  }

  const firstNames = Array.from({ length: SIZES.firstNames }, () => names.word(2));
  const people: Person[] = [];
  for (let i = 0; i < SIZES.people; i++) {
    people.push({
      name: `${rng.pick(firstNames)} ${names.word(rng.int(2, 3))}`,
      born: rng.int(1930, 1995),
      birthplace: rng.pick(cities).name,
      occupation: rng.pick(OCCUPATIONS),
      employer: '',
      joined: 0,
      spouse: null,
      siblings: rng.int(0, 5),
    });
  }
  // Four in five people are married, to each other.
  const order = rng.shuffle(people.map((_, i) => i));
  for (let i = 0; i + 1 < Math.floor(order.length * 0.8); i += 2) {
    const a = people[order[i]];
    const b = people[order[i + 1]];
    a.spouse = b.name;
    b.spouse = a.name;
  }

  const founders = rng.shuffle(people).slice(0, SIZES.organisations);
  const organisations: Organisation[] = founders.map((founder) => {
    const [industry, suffix] = rng.pick(INDUSTRIES);
    const shortName = names.word(2);
    const hq = rng.pick(cities).name;
    const offices = rng.shuffle(cities.map((c) => c.name).filter((n) => n !== hq)).slice(0, 2);
    return { name: `${shortName} ${suffix}`, shortName, industry, founded: Math.min(founder.born + rng.int(22, 45), 2020), founder: founder.name, headquarters: hq, offices };
  });
  for (const p of people) {
    const org = founders.includes(p) ? organisations[founders.indexOf(p)] : rng.pick(organisations);
    p.employer = org.name;
    p.joined = Math.max(org.founded, p.born + rng.int(20, 30));
  }

  const events: WorldEvent[] = [];
  for (let i = 0; i < SIZES.events; i++) {
    const city = rng.pick(cities).name;
    const year = rng.int(1960, 2022);
    const speakers = rng.shuffle(people).slice(0, 3).map((p) => p.name);
    events.push({ name: `${city} ${rng.pick(EVENT_KINDS)} ${year}`, city, year, speakers, sponsor: rng.pick(organisations).name });
  }
  return { seed, countries, cities, organisations, people, events };
}
