// Where a search episode's question comes from: drawn from the built-in generated world,
// or a row of Search-R1's question files. A file's split maps onto the environment's:
// train is train, validation is valid_seen and test valid_unseen, each standing in for
// the other when only one is given (Search-R1 validates on its test file). Seed n takes
// row order[n mod rows] of a fixed shuffle of the file (the same whichever split reads it), so a panel of consecutive seeds
// is a spread of distinct rows (every data source in its share), the whole file when it
// is as long as the file, and training's random seeds draw rows uniformly.

import type { Split } from '../../src/envs/types.ts';
import { Prng } from '../../src/util/random.ts';
import { EnvInputError } from '../errors.ts';
import { loadQuestions, type QaExample } from './dataset.ts';
import { drawQuestion } from './questions.ts';
import type { World } from './world.ts';

export interface SearchTask extends QaExample {
  /** single_hop / two_hop for generated questions, the data_source otherwise. */
  task_type: string;
}

export interface QuestionSource {
  task(split: Split, seed: number): SearchTask | Promise<SearchTask>;
  /** Distinct questions of a split (a file's rows); null when they are drawn without end. */
  count(split: Split): Promise<number | null>;
  /** Reads what the questions come from, throwing what is wrong with it. */
  check(): Promise<void>;
}

/** Questions drawn on the fly from a generated world. */
export class GeneratedQuestions implements QuestionSource {
  constructor(readonly world: World) {}

  task(split: Split, seed: number): SearchTask {
    const q = drawQuestion(this.world, split, seed);
    return { question: q.question, golden_answers: q.golden_answers, data_source: q.data_source, task_type: q.type };
  }

  async count(): Promise<null> {
    return null;
  }

  async check(): Promise<void> {}
}

/** Search-R1's train, validation and test files (JSONL or parquet). */
export interface QuestionFiles {
  train?: string;
  validation?: string;
  test?: string;
}

const SPLIT_FILES: Record<Split, readonly (keyof QuestionFiles)[]> = {
  train: ['train'],
  valid_seen: ['validation', 'test'],
  valid_unseen: ['test', 'validation'],
};

/** The files a split reads, the first one given winning. */
export function splitFiles(split: Split): readonly (keyof QuestionFiles)[] {
  return SPLIT_FILES[split];
}

export class DatasetQuestions implements QuestionSource {
  private readonly orders = new Map<Split, Promise<{ rows: QaExample[]; order: number[] }>>();

  constructor(private readonly files: QuestionFiles) {}

  /** The file a split reads, or null when none of its files is given. */
  fileOf(split: Split): string | null {
    const key = SPLIT_FILES[split].find((k) => this.files[k] !== undefined);
    return key === undefined ? null : this.files[key]!;
  }

  private split(split: Split): Promise<{ rows: QaExample[]; order: number[] }> {
    let loaded = this.orders.get(split);
    if (loaded === undefined) {
      const file = this.fileOf(split);
      if (file === null) {
        const wanted = SPLIT_FILES[split].map((k) => `env.search.${k}`).join(' or ');
        return Promise.reject(new EnvInputError(`search: no question file for split ${split} (set ${wanted})`));
      }
      loaded = loadQuestions(file).then((rows) => ({ rows, order: new Prng(0).shuffle(rows.map((_, i) => i)) }));
      loaded.catch(() => this.orders.delete(split));
      this.orders.set(split, loaded);
    }
    return loaded;
  }

  async task(split: Split, seed: number): Promise<SearchTask> {
    const { rows, order } = await this.split(split);
    const row = rows[order[((seed % rows.length) + rows.length) % rows.length]];
    return { ...row, task_type: row.data_source };
  }

  async count(split: Split): Promise<number | null> {
    return this.fileOf(split) === null ? null : (await this.split(split)).rows.length;
  }

  async check(): Promise<void> {
    for (const split of ['train', 'valid_seen', 'valid_unseen'] as const) if (this.fileOf(split) !== null) await this.split(split);
  }
}
