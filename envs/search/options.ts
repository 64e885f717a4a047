// The search environment's settings (the config's env.search block), the environment
// they make, and the defaults that follow the training method: how a turn is parsed
// and how results are shown follow the code base the method comes from. GRPO and
// Dr. GRPO (and SFT, which imitates an expert) are Search-R1's: responses cut after the
// action, results as Search-R1 renders them. Every other method is a self-distillation
// method or a relative, whose reference is SDAR's verl-agent (GiGPO, Skill-GRPO and
// the teacher methods run on its search environment there): responses kept whole and
// flagged, results as SDAR renders them.

import { storage } from '../../src/storage/storage.ts';
import { z } from 'zod';
import { SearchEnvironment, SEARCH_TOPK } from './env.ts';
import { HttpRetriever, RETRIEVER_PROTOCOLS } from './http_retriever.ts';
import { loadCorpus } from './jsonl.ts';
import { SEARCH_PARSINGS, type SearchParsing } from './parse.ts';
import { DatasetQuestions, splitFiles } from './question_source.ts';
import type { Split } from '../../src/envs/types.ts';
import { RESULT_FORMATS, type ResultFormat } from './result_format.ts';
import { Bm25Retriever } from './retriever.ts';

const posInt = z.int().min(1);
const nonNegInt = z.int().min(0);
const path = z.string().min(1);

const retrieverOptions = z.strictObject({
  /** A retrieval server's /retrieve endpoint; unset searches in-process (BM25 over env.search.corpus, else the built-in corpus). */
  url: z.url({ protocol: /^https?$/ }).optional(),
  /** Search-R1's server ({"queries": [...]}, one request per round) or SDAR's ({"query": "..."}, one per search). */
  protocol: z.enum(RETRIEVER_PROTOCOLS).default('search-r1'),
  /** Passages per search (Search-R1's retriever.topk). */
  topk: posInt.default(SEARCH_TOPK),
  /** Deadline of each request. */
  timeoutMs: posInt.default(30_000),
  /** Retries of a request that could not connect, timed out or got a 5xx, before the episodes waiting on it fail. */
  retries: nonNegInt.default(2),
  /** Wait before the first retry, doubling up to 8 times this. */
  backoffMs: nonNegInt.default(1000),
});

export const searchOptions = z
  .strictObject({
    /** Search-R1's question files (JSONL or parquet, as its data scripts write them); unset: the built-in generated questions. */
    train: path.optional(),
    /** The held-out questions validation plays (default: the test file, as Search-R1 validates). */
    validation: path.optional(),
    /** The held-out questions evaluation plays (default: the validation file). */
    test: path.optional(),
    /** A corpus (JSONL rows {id, contents}, wiki-18's layout) for in-process BM25, instead of a retrieval server. */
    corpus: path.optional(),
    retriever: retrieverOptions.prefault({}),
    /** How a turn's action is read: as Search-R1 does (cut after it) or as SDAR does (kept and flagged); default: the method's reference. */
    parsing: z.enum(SEARCH_PARSINGS).optional(),
    /** How results are shown: as Search-R1 renders them or as SDAR's verl-agent does; default: the method's reference. */
    resultFormat: z.enum(RESULT_FORMATS).optional(),
  })
  .superRefine((o, ctx) => {
    if (o.corpus !== undefined && o.retriever.url !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['corpus'], message: 'give a corpus (in-process BM25) or retriever.url, not both', input: o.corpus });
    }
    if (o.corpus !== undefined && !storage().exists(o.corpus)) ctx.addIssue({ code: 'custom', path: ['corpus'], message: 'no such file', input: o.corpus });
    for (const key of ['train', 'validation', 'test'] as const) {
      if (o[key] !== undefined && !storage().exists(o[key])) ctx.addIssue({ code: 'custom', path: [key], message: 'no such file', input: o[key] });
    }
  });

export type SearchOptions = z.output<typeof searchOptions>;

const SEARCH_R1_METHODS: ReadonlySet<string> = new Set(['grpo', 'dr_grpo', 'sft']);

/** The code base whose search environment a method's runs follow by default. */
export function searchReferenceOf(method: string): 'search-r1' | 'sdar' {
  return SEARCH_R1_METHODS.has(method) ? 'search-r1' : 'sdar';
}

/** The options with parsing and resultFormat filled from the method's reference where the config leaves them unset. */
export function resolveSearchOptions(o: SearchOptions, method: string): SearchOptions {
  const reference = searchReferenceOf(method);
  return { ...o, parsing: o.parsing ?? reference, resultFormat: o.resultFormat ?? (reference === 'sdar' ? 'verl-agent' : 'search-r1') };
}

export function parsingOf(o: SearchOptions): SearchParsing {
  return o.parsing ?? 'search-r1';
}

function httpRetriever(o: SearchOptions): HttpRetriever | null {
  const r = o.retriever;
  return r.url === undefined ? null : new HttpRetriever(r.url, { protocol: r.protocol, timeoutMs: r.timeoutMs, retries: r.retries, backoffMs: r.backoffMs });
}

/** The longest one step can wait on the retriever before it fails, and the settings that make it so; null without a server. */
export function longestSearchStep(o: SearchOptions): { ms: number; settings: string } | null {
  const r = httpRetriever(o);
  if (r === null) return null;
  return { ms: r.longestCallMs, settings: `env.search.retriever: ${o.retriever.retries + 1} attempts of up to ${o.retriever.timeoutMs} ms (timeoutMs, retries) and the backoff between them (backoffMs)` };
}

/**
 * A split that question files given for other splits leave without questions (a run
 * given only its training file has nothing to validate on); the generated world plays
 * every split.
 */
export function missingQuestionFile(o: SearchOptions, split: Split): { key: string; message: string } | null {
  const given = (['train', 'validation', 'test'] as const).filter((k) => o[k] !== undefined);
  const wanted = splitFiles(split);
  if (!given.length || wanted.some((k) => o[k] !== undefined)) return null;
  return {
    key: wanted[0],
    message: `its questions come from ${wanted.map((k) => `env.search.${k}`).join(' or ')}, and the question files given are for ${given.join(' and ')} only`,
  };
}

export function searchEnvironmentFrom(o: SearchOptions): SearchEnvironment {
  const files = { train: o.train, validation: o.validation, test: o.test };
  const questions = Object.values(files).some((f) => f !== undefined) ? new DatasetQuestions(files) : undefined;
  const retriever = httpRetriever(o) ?? (o.corpus !== undefined ? new Bm25Retriever(loadCorpus(o.corpus)) : undefined);
  const resultFormat: ResultFormat = o.resultFormat ?? 'search-r1';
  return new SearchEnvironment({ questions, retriever, topk: o.retriever.topk, resultFormat });
}
