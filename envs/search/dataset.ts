// Search-R1's question files as its data scripts write them (scripts/data_process/
// nq_search.py, qa_search_train_merge.py, qa_search_test_merge.py: FlashRAG's
// {id, question, golden_answers} plus data_source, prompt, ability,
// reward_model.ground_truth.target and extra_info, saved with datasets' to_parquet or
// to_json), SDAR's re-processed copies (the question only in extra_info and
// env_kwargs), and plain {question, golden_answers, data_source} rows. Parquet is read
// with hyparquet, anything else as JSON lines. Each file is read once per process.

import { resolve } from '../../src/storage/paths.ts';
import { storage, type ReadableFile } from '../../src/storage/storage.ts';
import { parquetMetadataAsync, parquetReadObjects, parquetSchema, type AsyncBuffer } from 'hyparquet';
import { EnvInputError } from '../errors.ts';
import { parseJsonl, readText } from './jsonl.ts';

export interface QaExample {
  question: string;
  /** What an answer is scored against: reward_model.ground_truth.target where the row has it, as Search-R1's reward reads it. */
  golden_answers: string[];
  /** nq, hotpotqa, ...: the task type, reported on its own. */
  data_source: string;
}

const isObject = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);
const field = (x: unknown, key: string): unknown => (isObject(x) ? x[key] : undefined);

function show(x: unknown): string {
  const s = JSON.stringify(x, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v));
  return s === undefined ? 'nothing' : s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** One row of a Search-R1 (or SDAR) question file as the question it asks; `where` names the file and row in errors. */
export function qaExampleOf(row: unknown, where: string): QaExample {
  if (!isObject(row)) throw new EnvInputError(`${where}: a question row must be an object, got ${show(row)}`);
  const question = [row.question, field(row.extra_info, 'question'), field(row.env_kwargs, 'question')].find((q) => typeof q === 'string');
  if (typeof question !== 'string' || question.trim() === '') {
    throw new EnvInputError(`${where}: no question (expected a non-empty string in question, extra_info.question or env_kwargs.question)`);
  }
  const targetAt = [
    ['reward_model.ground_truth.target', field(field(row.reward_model, 'ground_truth'), 'target')],
    ['env_kwargs.ground_truth.target', field(field(row.env_kwargs, 'ground_truth'), 'target')],
    ['golden_answers', row.golden_answers],
  ].find(([, v]) => v !== undefined && v !== null);
  if (targetAt === undefined) throw new EnvInputError(`${where}: no gold answers (expected reward_model.ground_truth.target or golden_answers)`);
  const [name, target] = targetAt as [string, unknown];
  // qa_em.py takes a single string as a one-answer list.
  const answers = typeof target === 'string' ? [target] : target;
  if (!Array.isArray(answers) || answers.length === 0 || !answers.every((a) => typeof a === 'string')) {
    throw new EnvInputError(`${where}: ${name} must be a string or a non-empty list of strings, got ${show(target)}`);
  }
  const source = row.data_source ?? field(row.env_kwargs, 'data_source');
  if (source !== undefined && source !== null && typeof source !== 'string') throw new EnvInputError(`${where}: data_source must be a string, got ${show(source)}`);
  return { question, golden_answers: answers, data_source: typeof source === 'string' && source !== '' ? source : 'unknown' };
}

/** The top-level columns qaExampleOf reads. */
const ROW_COLUMNS = ['question', 'golden_answers', 'data_source', 'reward_model', 'extra_info', 'env_kwargs'];

async function readRows(path: string): Promise<{ rows: unknown[]; where: (i: number) => string }> {
  if (!path.toLowerCase().endsWith('.parquet')) {
    return { rows: parseJsonl(readText(path, 'questions'), path), where: (i) => `${path}:${i + 1}` };
  }
  let rows: unknown[];
  let handle: ReadableFile | null = null;
  try {
    handle = storage().openRead(path);
    // Read by ranges, as hyparquet asks for them: a file's footer and the columns wanted.
    const opened = handle;
    const file: AsyncBuffer = {
      byteLength: opened.size,
      slice: (start, end = opened.size) => {
        const bytes = new Uint8Array(end - start);
        for (let done = 0, n = 1; done < bytes.length && n > 0; done += n) n = opened.read(bytes.subarray(done), start + done);
        return bytes.buffer;
      },
    };
    const metadata = await parquetMetadataAsync(file);
    // Only the columns a question is read from: the prompt column alone is most of a Search-R1 file.
    const present = new Set(parquetSchema(metadata).children.map((c) => c.element.name));
    rows = await parquetReadObjects({ file, metadata, columns: ROW_COLUMNS.filter((c) => present.has(c)) });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new EnvInputError(`questions ${path}: ${err.code === 'ENOENT' ? 'no such file' : `not a parquet file hyparquet can read (${err.message})`}`);
  } finally {
    handle?.close();
  }
  return { rows, where: (i) => `${path} row ${i}` };
}

const cache = new Map<string, { stamp: string; rows: Promise<QaExample[]> }>();

/** The questions of a Search-R1 file (.parquet, else JSON lines), in file order; refused with the file and row of the first bad one. */
export function loadQuestions(path: string): Promise<QaExample[]> {
  const key = resolve(path);
  // A missing file's stamp is 'missing'; readRows says so, naming the file.
  const s = storage().stat(key);
  const stamp = s ? `${s.mtimeMs}:${s.size}` : 'missing';
  const hit = cache.get(key);
  if (hit !== undefined && hit.stamp === stamp) return hit.rows;
  const rows = readRows(path).then(({ rows, where }) => {
    if (rows.length === 0) throw new EnvInputError(`questions ${path}: no rows`);
    return rows.map((row, i) => qaExampleOf(row, where(i)));
  });
  // A failed read is not kept: the next attempt reads the file again.
  rows.catch(() => cache.delete(key));
  cache.set(key, { stamp, rows });
  return rows;
}
