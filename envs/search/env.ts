// The search-QA environment (Search-R1 format): each turn is a <search> whose results
// come back inside <information>, or an <answer> scored by exact match. Four turns.
// Questions come from the built-in generated world or Search-R1's files
// (question_source.ts); searches go to BM25 in-process or to a retrieval server, the
// searches of one rollout round in one call (round_batch.ts). A retriever that fails
// fails the step: the agent loop records it as that episode's error.

import { isSplit, type CreateOptions, type EnvInfo, type Environment, type EnvSession, type ResetResult, type Split, type StepResult, type TaskSplit } from '../../src/envs/types.ts';
import { EnvInputError, EpisodeDoneError } from '../errors.ts';
import { qaExampleOf } from './dataset.ts';
import { worldCorpus } from './documents.ts';
import { searchExpertAction } from './expert.ts';
import type { CorpusDocument } from './jsonl.ts';
import { exactMatch } from './normalize.ts';
import { parseSearchR1 } from './parse.ts';
import { GeneratedQuestions, type QuestionSource, type SearchTask } from './question_source.ts';
import { formatInformation, type ResultFormat } from './result_format.ts';
import { Bm25Retriever, type RetrievedDocument, type Retriever } from './retriever.ts';
import { RoundBatcher } from './round_batch.ts';
import { generateWorld, type World } from './world.ts';

export const SEARCH_MAX_TURNS = 4;
export const SEARCH_TOPK = 3;

export const INVALID_ACTION_MESSAGE =
  '\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. ' +
  'If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n';

/** The admissible actions, as templates (like the shop's search[<your query>]). */
export const SEARCH_ACTIONS: readonly string[] = ['<search> your query </search>', '<answer> your answer </answer>'];

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

  /** `action` is the agent's block, or a whole response, which is read as Search-R1 reads it (parse.ts). */
  async step(action: string): Promise<StepResult> {
    if (this.done) throw new EpisodeDoneError('search: step after the episode ended');
    this.turns++;
    const turn = parseSearchR1(action);
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
  readonly questions: QuestionSource;
  private readonly retriever: RoundBatcher;
  private readonly topk: number;
  private readonly resultFormat: ResultFormat;

  constructor(opts: SearchEnvironmentOptions = {}) {
    this.maxSteps = opts.maxTurns ?? SEARCH_MAX_TURNS;
    this.topk = opts.topk ?? SEARCH_TOPK;
    this.resultFormat = opts.resultFormat ?? 'search-r1';
    this.questions = opts.questions ?? new GeneratedQuestions(builtInSearchData().world);
    this.retriever = new RoundBatcher(opts.retriever ?? (opts.corpus !== undefined ? new Bm25Retriever(opts.corpus) : builtInSearchData().retriever));
  }

  async create(opts: CreateOptions): Promise<SearchSession> {
    if (!isSplit(opts.split)) throw new EnvInputError(`search: unknown split ${String(opts.split)}`);
    if (!Number.isSafeInteger(opts.seed)) throw new EnvInputError(`search: seed must be an integer, got ${String(opts.seed)}`);
    const task = opts.task !== undefined && opts.task !== null ? this.explicitTask(opts.task) : await this.questions.task(opts.split, opts.seed);
    return new SearchSession(task, this.retriever, this.topk, this.maxSteps, this.resultFormat);
  }

  /** The question files can be read and the retriever answers, before the first episode. */
  async check(): Promise<void> {
    await this.questions.check();
    await this.retriever.check(this.topk);
  }

  taskCount(split: TaskSplit): Promise<number | null> {
    return isSplit(split) ? this.questions.count(split as Split) : Promise.resolve(null);
  }

  private explicitTask(task: unknown): SearchTask {
    const row = qaExampleOf(task, 'search task');
    const type = (task as { task_type?: unknown }).task_type;
    return { ...row, task_type: typeof type === 'string' ? type : row.data_source };
  }
}
