// The search-QA environment (Search-R1 format): each turn is a <search> whose results
// come back inside <information>, or an <answer> scored by exact match. Four turns.

import { isSplit, SPLITS, type CreateOptions, type EnvInfo, type Environment, type EnvSession, type ResetResult, type Split, type StepResult } from '../../src/envs/types.ts';
import { EnvInputError, EpisodeDoneError } from '../errors.ts';
import { worldCorpus } from './documents.ts';
import { searchExpertAction } from './expert.ts';
import { HttpRetriever } from './http_retriever.ts';
import { asQaExample, loadCorpus, loadDataset, splitDocument, type CorpusDocument, type QaExample } from './jsonl.ts';
import { exactMatch } from './normalize.ts';
import { parseSearchResponse } from './parse.ts';
import { drawQuestion } from './questions.ts';
import { Bm25Retriever, type RetrievalHit, type RetrievedDocument, type Retriever } from './retriever.ts';
import { generateWorld, type World } from './world.ts';

export const SEARCH_MAX_TURNS = 4;
export const SEARCH_TOPK = 3;

export const INVALID_ACTION_MESSAGE =
  '\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. ' +
  'If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n';

/** The admissible actions, as templates (like the shop's search[<your query>]). */
export const SEARCH_ACTIONS: readonly string[] = ['<search> your query </search>', '<answer> your answer </answer>'];

export interface SearchTask extends QaExample {
  /** single_hop / two_hop for generated questions, the data_source otherwise. */
  task_type: string;
}

/** Where tasks come from: one question per (split, seed). */
export interface QuestionSource {
  task(split: Split, seed: number): SearchTask;
}

/** Questions drawn on the fly from a generated world. */
export class GeneratedQuestions implements QuestionSource {
  constructor(readonly world: World) {}

  task(split: Split, seed: number): SearchTask {
    const q = drawQuestion(this.world, split, seed);
    return { question: q.question, golden_answers: q.golden_answers, data_source: q.data_source, task_type: q.type };
  }
}

/** Questions from datasets (e.g. JSONL files): seed n takes row n modulo the split's size. */
export class DatasetQuestions implements QuestionSource {
  constructor(private readonly splits: Partial<Record<Split, readonly QaExample[]>>) {}

  task(split: Split, seed: number): SearchTask {
    const rows = this.splits[split];
    if (rows === undefined || rows.length === 0) throw new EnvInputError(`search: no questions for split ${split}`);
    const row = rows[((seed % rows.length) + rows.length) % rows.length];
    return { ...row, task_type: row.data_source };
  }
}

/**
 * How retrieved passages are shown: Search-R1's form (`Doc 1(Title: <first line>)
 * <rest>`, the block between blank lines), or verl-agent's (`Doc 1: <contents>`, the
 * block between single newlines), which the SDAR reference code uses.
 */
export type ResultFormat = 'search-r1' | 'verl-agent';

export function formatInformation(hits: readonly RetrievalHit[], format: ResultFormat = 'search-r1'): string {
  if (format === 'verl-agent') {
    return `\n<information>${hits.map((h, i) => `Doc ${i + 1}: ${h.document.contents.trim()}\n`).join('')}</information>\n`;
  }
  const docs = hits.map((h, i) => {
    const { title, text } = splitDocument(h.document.contents);
    return `Doc ${i + 1}(Title: ${title}) ${text}\n`;
  });
  return `\n\n<information>${docs.join('').trim()}</information>\n\n`;
}

export class SearchSession implements EnvSession {
  readonly task: string;
  private turns = 0;
  private done = false;
  private won = false;
  private retrieved: RetrievedDocument[] = [];

  constructor(
    readonly question: SearchTask,
    private readonly retriever: Retriever,
    private readonly topk = SEARCH_TOPK,
    private readonly maxTurns = SEARCH_MAX_TURNS,
    private readonly resultFormat: ResultFormat = 'search-r1',
  ) {
    this.task = question.question;
  }

  reset(): ResetResult {
    this.turns = 0;
    this.done = false;
    this.won = false;
    this.retrieved = [];
    return { observation: this.question.question, admissible_actions: [...SEARCH_ACTIONS], info: this.info() };
  }

  /** `action` is the model's turn (cut or not) or just its <search>/<answer> block. */
  async step(action: string): Promise<StepResult> {
    if (this.done) throw new EpisodeDoneError('search: step after the episode ended');
    this.turns++;
    const turn = parseSearchResponse(action);
    let observation = INVALID_ACTION_MESSAGE;
    let reward = 0;
    const extra: Record<string, unknown> = { valid: turn.valid };
    if (turn.parsed?.kind === 'search') {
      const [hits] = await this.retriever.retrieve([turn.parsed.query], this.topk);
      this.retrieved.push(...hits.map((h) => h.document));
      observation = formatInformation(hits, this.resultFormat);
    } else if (turn.parsed?.kind === 'answer') {
      this.won = exactMatch(turn.parsed.answer, this.question.golden_answers);
      reward = this.won ? 1 : 0;
      this.done = true;
      observation = '';
      extra.answer = turn.parsed.answer;
    }
    if (this.turns >= this.maxTurns) this.done = true;
    return {
      observation,
      reward,
      done: this.done,
      admissible_actions: this.done ? [] : [...SEARCH_ACTIONS],
      info: { ...this.info(), ...extra },
    };
  }

  close(): void {}

  private info(): EnvInfo {
    return {
      won: this.won,
      task_type: this.question.task_type,
      expert_action: this.done ? null : searchExpertAction(this.question.question, this.retrieved),
    };
  }
}

export interface SearchEnvironmentOptions {
  /** Default: questions drawn from the built-in generated world. */
  questions?: QuestionSource;
  /** Default: BM25 over `corpus`. */
  retriever?: Retriever;
  /** Default: the built-in world's corpus. */
  corpus?: readonly CorpusDocument[];
  topk?: number;
  maxTurns?: number;
  resultFormat?: ResultFormat;
}

let builtIn: { world: World; corpus: CorpusDocument[]; retriever: Bm25Retriever } | undefined;

/** The built-in world, its corpus and a BM25 retriever over it (built once per process). */
export function builtInSearchData(): { world: World; corpus: CorpusDocument[]; retriever: Bm25Retriever } {
  if (builtIn === undefined) {
    const world = generateWorld();
    const corpus = worldCorpus(world);
    builtIn = { world, corpus, retriever: new Bm25Retriever(corpus) };
  }
  return builtIn;
}

export class SearchEnvironment implements Environment {
  readonly name = 'search';
  readonly version = '1.0.0';
  readonly maxSteps: number;
  private readonly questions: QuestionSource;
  private readonly retriever: Retriever;
  private readonly topk: number;
  private readonly resultFormat: ResultFormat;

  constructor(opts: SearchEnvironmentOptions = {}) {
    this.maxSteps = opts.maxTurns ?? SEARCH_MAX_TURNS;
    this.topk = opts.topk ?? SEARCH_TOPK;
    this.resultFormat = opts.resultFormat ?? 'search-r1';
    this.questions = opts.questions ?? new GeneratedQuestions(builtInSearchData().world);
    this.retriever = opts.retriever ?? (opts.corpus !== undefined ? new Bm25Retriever(opts.corpus) : builtInSearchData().retriever);
  }

  create(opts: CreateOptions): SearchSession {
    if (!isSplit(opts.split)) throw new EnvInputError(`search: unknown split ${String(opts.split)}`);
    if (!Number.isSafeInteger(opts.seed)) throw new EnvInputError(`search: seed must be an integer, got ${String(opts.seed)}`);
    const task = opts.task !== undefined && opts.task !== null ? this.explicitTask(opts.task) : this.questions.task(opts.split, opts.seed);
    return new SearchSession(task, this.retriever, this.topk, this.maxSteps, this.resultFormat);
  }

  private explicitTask(task: unknown): SearchTask {
    const row = asQaExample(task, 'search task');
    const type = (task as { task_type?: unknown }).task_type;
    return { ...row, task_type: typeof type === 'string' ? type : row.data_source };
  }
}

export interface SearchFiles {
  train?: string;
  valid_seen?: string;
  valid_unseen?: string;
  /** Corpus JSONL for the in-process BM25 retriever. */
  corpus?: string;
  /** A Search-R1 compatible /retrieve endpoint, used instead of a local corpus. */
  retrieverUrl?: string;
  topk?: number;
  maxTurns?: number;
}

/** An environment over JSONL datasets (Search-R1 format) with a local corpus or a remote retriever. */
export function searchEnvironmentFromFiles(files: SearchFiles): SearchEnvironment {
  const splits: Partial<Record<Split, QaExample[]>> = {};
  for (const s of SPLITS) if (files[s] !== undefined) splits[s] = loadDataset(files[s]!);
  if (files.retrieverUrl === undefined && files.corpus === undefined) throw new EnvInputError('search: give a corpus file or a retriever URL');
  const retriever = files.retrieverUrl !== undefined ? new HttpRetriever(files.retrieverUrl) : new Bm25Retriever(loadCorpus(files.corpus!));
  return new SearchEnvironment({ questions: new DatasetQuestions(splits), retriever, topk: files.topk, maxTurns: files.maxTurns });
}
