// The offline search-QA data: a generated world written as a corpus plus question sets
// per split, in Search-R1's JSONL formats, so the built-in data and real NQ/HotpotQA
// files go through the same loaders.

import { join } from '../../src/storage/paths.ts';
import { storage } from '../../src/storage/storage.ts';
import { SPLITS, type Split } from '../../src/envs/types.ts';
import { worldCorpus } from './documents.ts';
import type { QaExample } from './dataset.ts';
import { saveJsonl, type CorpusDocument } from './jsonl.ts';
import { drawQuestion } from './questions.ts';
import { generateWorld, WORLD_SEED, type World } from './world.ts';

export interface SearchData {
  world: World;
  corpus: CorpusDocument[];
  splits: Record<Split, QaExample[]>;
}

export interface GenerateOptions {
  /** World seed (default WORLD_SEED, the world the environment uses by default). */
  seed?: number;
  /** Distinct questions per split. */
  counts?: Partial<Record<Split, number>>;
}

const DEFAULT_COUNTS: Record<Split, number> = { train: 2000, valid_seen: 200, valid_unseen: 200 };

/** Questions for task seeds 0, 1, 2, ... of a split, skipping repeats, until `count` are collected. */
function questionSet(world: World, split: Split, count: number): QaExample[] {
  const seen = new Set<string>();
  const out: QaExample[] = [];
  for (let seed = 0; out.length < count && seed < count * 20; seed++) {
    const { question, golden_answers, data_source } = drawQuestion(world, split, seed);
    if (seen.has(question)) continue;
    seen.add(question);
    out.push({ question, golden_answers, data_source });
  }
  return out;
}

export function generateSearchData(opts: GenerateOptions = {}): SearchData {
  const world = generateWorld(opts.seed ?? WORLD_SEED);
  const counts = { ...DEFAULT_COUNTS, ...opts.counts };
  const splits = Object.fromEntries(SPLITS.map((s) => [s, questionSet(world, s, counts[s])])) as Record<Split, QaExample[]>;
  return { world, corpus: worldCorpus(world), splits };
}

export interface SearchDataFiles {
  corpus: string;
  train: string;
  valid_seen: string;
  valid_unseen: string;
}

/** Writes corpus.jsonl and one <split>.jsonl per split into `dir`; returns the data and the paths. */
export function generate(dir: string, opts: GenerateOptions = {}): { data: SearchData; files: SearchDataFiles } {
  const data = generateSearchData(opts);
  storage().makeDir(dir);
  const files: SearchDataFiles = {
    corpus: join(dir, 'corpus.jsonl'),
    train: join(dir, 'train.jsonl'),
    valid_seen: join(dir, 'valid_seen.jsonl'),
    valid_unseen: join(dir, 'valid_unseen.jsonl'),
  };
  saveJsonl(files.corpus, data.corpus);
  for (const s of SPLITS) saveJsonl(files[s], data.splits[s]);
  return { data, files };
}
