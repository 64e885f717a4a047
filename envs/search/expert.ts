// The expert reads, it does not look up: it parses the question into a subject and a
// chain of relations, searches for the subject with the relation's key word, and
// extracts each fact from the text of the documents retrieved so far in the episode.
// A question it cannot parse (a dataset's) gets the retrieve-and-read baseline: search
// the question as asked, then answer with the title of the best passage. Gold answers
// never reach it.

import { splitDocument } from './jsonl.ts';
import type { RetrievedDocument } from './retriever.ts';
import { parseQuestion, type Relation } from './questions.ts';

const NAME = '([A-Z][a-z]+(?: [A-Z][a-z]+)*)';

/** The sentence stating each fact, as a pattern around the subject's escaped name. */
const FACT_PATTERNS: Record<Relation, (subject: string) => RegExp> = {
  born_in: (s) => new RegExp(`${s} was born in ${NAME} in \\d{4}`),
  works_for: (s) => new RegExp(`${s} works for ${NAME} as`),
  married_to: (s) => new RegExp(`${s} is married to ${NAME}\\.`),
  founded_year: (s) => new RegExp(`${s} was founded in (\\d{4})`),
  founded_by: (s) => new RegExp(`${s} was founded in \\d{4} by ${NAME}\\.`),
  headquartered_in: (s) => new RegExp(`${s} is headquartered in ${NAME}\\.`),
  located_in: (s) => new RegExp(`${s} is a city in ${NAME}\\.`),
  capital: (s) => new RegExp(`${s} is a country whose capital is ${NAME}\\.`),
};

const QUERY_WORDS: Record<Relation, string> = {
  born_in: 'born',
  works_for: 'works for',
  married_to: 'married',
  founded_year: 'founded',
  founded_by: 'founded',
  headquartered_in: 'headquartered',
  located_in: 'city',
  capital: 'capital',
};

function escape(name: string): string {
  return `(?<![A-Za-z])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`;
}

/** The value of `relation` for `subject`, if a retrieved document states it. */
export function readFact(relation: Relation, subject: string, documents: readonly RetrievedDocument[]): string | undefined {
  const pattern = FACT_PATTERNS[relation](escape(subject));
  for (const d of documents) {
    const m = pattern.exec(d.contents);
    if (m !== null) return m[1];
  }
  return undefined;
}

/** The expert's next turn: a search for the first unknown fact, or the answer. */
export function searchExpertAction(question: string, documents: readonly RetrievedDocument[]): string {
  const parsed = parseQuestion(question);
  if (parsed === null) {
    // Search-R1's title is the first line without its quotes (retrieval_server.py's content.split("\n")[0].strip('"')).
    return documents.length === 0 ? `<search> ${question} </search>` : `<answer> ${splitDocument(documents[0].contents).title.replace(/^"+|"+$/g, '')} </answer>`;
  }
  let entity = parsed.subject;
  for (const relation of parsed.template.relations) {
    const value = readFact(relation, entity, documents);
    if (value === undefined) return `<search> ${entity} ${QUERY_WORDS[relation]} </search>`;
    entity = value;
  }
  return `<answer> ${entity} </answer>`;
}
