// Search-R1's data formats, so real datasets and corpora drop in unchanged:
// datasets are JSONL rows {question, golden_answers, data_source} and corpora are JSONL
// rows {id, contents} whose contents hold the title on the first line.

import { readFileSync, writeFileSync } from 'node:fs';
import { EnvInputError } from '../errors.ts';

export interface QaExample {
  question: string;
  golden_answers: string[];
  data_source: string;
}

export interface CorpusDocument {
  id: string;
  contents: string;
}

export function parseJsonl(text: string, source: string): unknown[] {
  const rows: unknown[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      rows.push(JSON.parse(line));
    } catch (e) {
      throw new EnvInputError(`${source}:${i + 1}: not JSON (${(e as Error).message})`);
    }
  });
  return rows;
}

export function toJsonl(rows: readonly unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length > 0 ? '\n' : '');
}

function isStringArray(x: unknown): x is string[] {
  return Array.isArray(x) && x.every((s) => typeof s === 'string');
}

/** Checks a dataset row; extra fields are dropped, a missing data_source becomes "unknown". */
export function asQaExample(row: unknown, where: string): QaExample {
  const r = row as Record<string, unknown> | null;
  if (r === null || typeof r !== 'object') throw new EnvInputError(`${where}: a dataset row must be an object`);
  if (typeof r.question !== 'string' || r.question.trim() === '') throw new EnvInputError(`${where}: question must be a non-empty string`);
  if (!isStringArray(r.golden_answers) || r.golden_answers.length === 0) {
    throw new EnvInputError(`${where}: golden_answers must be a non-empty list of strings`);
  }
  if (r.data_source !== undefined && typeof r.data_source !== 'string') throw new EnvInputError(`${where}: data_source must be a string`);
  return { question: r.question, golden_answers: r.golden_answers, data_source: r.data_source ?? 'unknown' };
}

export function asCorpusDocument(row: unknown, where: string): CorpusDocument {
  const r = row as Record<string, unknown> | null;
  if (r === null || typeof r !== 'object') throw new EnvInputError(`${where}: a corpus row must be an object`);
  if ((typeof r.id !== 'string' && typeof r.id !== 'number') || typeof r.contents !== 'string') {
    throw new EnvInputError(`${where}: a corpus row needs id and contents`);
  }
  return { id: String(r.id), contents: r.contents };
}

export function loadDataset(path: string): QaExample[] {
  return parseJsonl(readFileSync(path, 'utf8'), path).map((row, i) => asQaExample(row, `${path}:${i + 1}`));
}

export function loadCorpus(path: string): CorpusDocument[] {
  return parseJsonl(readFileSync(path, 'utf8'), path).map((row, i) => asCorpusDocument(row, `${path}:${i + 1}`));
}

export function saveJsonl(path: string, rows: readonly unknown[]): void {
  writeFileSync(path, toJsonl(rows));
}

/** The first line of a document's contents is its title. */
export function splitDocument(contents: string): { title: string; text: string } {
  const nl = contents.indexOf('\n');
  return nl < 0 ? { title: contents, text: '' } : { title: contents.slice(0, nl), text: contents.slice(nl + 1) };
}
