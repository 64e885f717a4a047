// JSON lines, and Search-R1's corpus format (wiki-18's): rows {id, contents} whose
// contents hold the quoted title on the first line.

import { storage } from '../../src/storage/storage.ts';
import { EnvInputError } from '../errors.ts';

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

export function asCorpusDocument(row: unknown, where: string): CorpusDocument {
  const r = row as Record<string, unknown> | null;
  if (r === null || typeof r !== 'object') throw new EnvInputError(`${where}: a corpus row must be an object`);
  if ((typeof r.id !== 'string' && typeof r.id !== 'number') || typeof r.contents !== 'string') {
    throw new EnvInputError(`${where}: a corpus row needs id and contents`);
  }
  return { id: String(r.id), contents: r.contents };
}

export function readText(path: string, what: string): string {
  try {
    return storage().readText(path);
  } catch (e) {
    throw new EnvInputError(`${what} ${path}: cannot read it (${(e as Error).message})`);
  }
}

export function loadCorpus(path: string): CorpusDocument[] {
  return parseJsonl(readText(path, 'corpus'), path).map((row, i) => asCorpusDocument(row, `${path}:${i + 1}`));
}

export function saveJsonl(path: string, rows: readonly unknown[]): void {
  storage().writeAtomic(path, toJsonl(rows));
}

/** The first line of a document's contents is its title (Search-R1's content.split("\n")[0]). */
export function splitDocument(contents: string): { title: string; text: string } {
  const nl = contents.indexOf('\n');
  return nl < 0 ? { title: contents, text: '' } : { title: contents.slice(0, nl), text: contents.slice(nl + 1) };
}
