// `train` and `eval` through the CLI on Search-R1's own files (tests/fixtures/search_r1:
// a train split as JSON lines and parquet, a test split, and their corpus) against the
// retrieval server of envs/retriever_server.ts, which answers as Search-R1's does (and,
// with --protocol sdar, as SDAR's): training draws the train questions and sends each
// rollout round's searches in one request, validation and evaluation play the test
// questions and report each data source; the expert's demonstrations search the
// dataset's questions; a retriever that fails stops the run with its error, one that
// is down stops it before it starts; a run given only its training file, which would
// have nothing to validate on, is refused before it starts.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startRetrieverServer } from '../envs/retriever_server.ts';
import { loadQuestions } from '../envs/search/dataset.ts';
import { loadCorpus } from '../envs/search/jsonl.ts';
import { Bm25Retriever, type RetrievalHit, type Retriever } from '../envs/search/retriever.ts';
import type { EvalReport } from '../src/eval/evaluate.ts';
import { readMetrics } from '../src/report/metrics.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { searcherModel } from './support/searcher_model.ts';
import { ROOT, runCli } from './support/cli_process.ts';

const FIXTURES = path.join(ROOT, 'tests', 'fixtures', 'search_r1');
const fixture = (name: string) => path.join(FIXTURES, name);
const slow = { timeout: 600_000 };
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-search-cli-'));
after(() => fs.rmSync(out, { recursive: true, force: true }));

const cli = runCli;

/** BM25 over the fixtures' corpus, keeping the queries of every call. */
class RecordingRetriever implements Retriever {
  readonly calls: string[][] = [];
  private readonly bm25 = new Bm25Retriever(loadCorpus(fixture('corpus.jsonl')));

  retrieve(queries: readonly string[], topk: number): RetrievalHit[][] {
    this.calls.push([...queries]);
    return this.bm25.retrieve(queries, topk);
  }

  /** The calls of episodes: without the check each run makes before its first rollout. */
  searches(): string[][] {
    return this.calls.filter((c) => !(c.length === 1 && c[0] === 'retriever check'));
  }
}

const QUERY = 'capital';
let searcher = '';
let trainQuestions: Set<string>;
let testQuestions: Set<string>;

before(async () => {
  trainQuestions = new Set((await loadQuestions(fixture('train.parquet'))).map((q) => q.question));
  testQuestions = new Set((await loadQuestions(fixture('test.parquet'))).map((q) => q.question));
  searcher = path.join(out, 'searcher');
  await searcherModel(searcher, QUERY, [...trainQuestions, ...testQuestions]);
});

/** The smoke run (two tasks of two runs) at full size on search, in its own directory. */
const smoke = (name: string, ...overrides: string[]) => [
  'train', 'examples/smoke.yaml', '--full-size', `output.dir=${out}`, `output.runName=${name}`, 'env.name=search', 'rollout.maxTurns=2', ...overrides,
];

const checkpoints = (run: string) => (fs.existsSync(path.join(out, run, 'checkpoints')) ? fs.readdirSync(path.join(out, run, 'checkpoints')).filter((n) => n.startsWith('ckpt-')) : []);

describe('search through the CLI on Search-R1 files', () => {
  test("train draws the train file's questions and sends each round's searches in one request; validation and eval play the test file per data source; SDAR's server works", slow, async () => {
    const retriever = new RecordingRetriever();
    const server = await startRetrieverServer(retriever);
    const sdarRetriever = new RecordingRetriever();
    const sdar = await startRetrieverServer(sdarRetriever, { protocol: 'sdar' });
    try {
      const r = await cli(smoke('grpo', `model.path=${searcher}`, `env.search.train=${fixture('train.jsonl')}`, `env.search.test=${fixture('test.parquet')}`,
        `env.search.retriever.url=${server.url}`, 'validation.tasks=5'));
      assert.equal(r.code, 0, r.out);
      const iter = readTrajectoryLog(path.join(out, 'grpo', 'rollouts', 'iter-1.jsonl'));
      assert.equal(iter.length, 4);
      for (const t of iter) {
        assert.equal(t.error, undefined, t.error);
        assert.ok(trainQuestions.has(t.task), t.task);
        assert.ok(t.taskType === 'nq' || t.taskType === 'hotpotqa', t.taskType);
        for (const u of t.turns) {
          assert.equal(u.action, `<search> ${QUERY} </search>`);
          assert.match(u.observation, /^\n\n<information>Doc 1\(Title: "/);
        }
      }
      const val = readTrajectoryLog(path.join(out, 'grpo', 'rollouts', 'val-1.jsonl'));
      assert.deepEqual(new Set(val.map((t) => t.task)), testQuestions);
      // Two rounds of the four training episodes, then two of the five validation episodes: one request each.
      assert.deepEqual(retriever.searches().map((c) => c.length), [4, 4, 5, 5]);
      assert.ok(retriever.searches().every((c) => c.every((q) => q === QUERY)));
      const [metrics] = readMetrics(path.join(out, 'grpo', 'metrics.jsonl'));
      assert.ok('val/success/nq' in metrics && 'val/success/hotpotqa' in metrics, Object.keys(metrics).join(' '));

      const report = path.join(out, 'grpo-eval.json');
      const e = await cli(['eval', path.join(out, 'grpo'), '--dataset', fixture('test.jsonl'), '--retriever', sdar.url, '--retriever-protocol', 'sdar', '--seeds', '1', '--out', report, '--progress', 'none']);
      assert.equal(e.code, 0, e.out);
      const saved = JSON.parse(fs.readFileSync(report, 'utf8')) as EvalReport;
      assert.equal(saved.tasks, 5);
      assert.deepEqual(Object.keys(saved.summary.byType).sort(), ['hotpotqa', 'nq']);
      assert.deepEqual([saved.summary.byType.nq.tasks, saved.summary.byType.hotpotqa.tasks], [3, 2]);
      assert.match(e.out, /\nnq +3 +3 /);
      assert.match(e.out, /\nhotpotqa +2 +2 /);
      // SDAR's server takes one query per request.
      assert.ok(sdarRetriever.searches().length >= 5 && sdarRetriever.searches().every((c) => c.length === 1 && c[0] === QUERY));

      const wrong = await cli(['eval', path.join(out, 'grpo'), '--dataset', fixture('test.jsonl'), '--retriever', server.url, '--retriever-protocol', 'sdar', '--seeds', '1']);
      assert.equal(wrong.code, 1, wrong.out);
      assert.match(wrong.out, /error: retriever: POST http:\/\/127\.0\.0\.1:\d+\/retrieve answered 422: .*"loc":\["body","queries"\].*set env\.search\.retriever\.protocol=search-r1/);
    } finally {
      await server.close();
      await sdar.close();
    }
  });

  test("the expert's demonstrations (train --method sft) search the dataset's own questions", slow, async () => {
    const retriever = new RecordingRetriever();
    const server = await startRetrieverServer(retriever);
    try {
      const r = await cli(smoke('sft', 'method=sft', 'algorithm.sft.episodes=16', 'rollout.maxResponseTokens=512', `env.search.train=${fixture('train.parquet')}`, `env.search.test=${fixture('test.jsonl')}`,
        `env.search.retriever.url=${server.url}`, 'validation.every=0', 'validation.tasks=1'));
      assert.equal(r.code, 0, r.out);
      // The expert searches each question as asked (its reasoning, spelled out by a household vocabulary, needs the longer responses), all sixteen episodes' first turns in one request.
      const expert = retriever.searches().slice(0, 1).flat();
      assert.equal(expert.length, 16, JSON.stringify(retriever.calls));
      for (const q of expert) assert.ok(trainQuestions.has(q), q);
    } finally {
      await server.close();
    }
  });

  test('a retriever that fails stops the run with its error and no checkpoint; one that is down stops it before it starts', slow, async () => {
    const failing = await startRetrieverServer({
      retrieve: (queries) => {
        if (queries.length === 1 && queries[0] === 'retriever check') return [[]];
        throw new Error('faiss index lost');
      },
    });
    const logged = console.error;
    console.error = () => {};
    try {
      const r = await cli(smoke('failing', `model.path=${searcher}`, `env.search.train=${fixture('train.jsonl')}`, `env.search.test=${fixture('test.jsonl')}`, `env.search.retriever.url=${failing.url}`,
        'env.search.retriever.retries=1', 'env.search.retriever.backoffMs=10'));
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, new RegExp(`error: iteration 1: every one of its 4 episodes failed in the environment; the server's first error: turn 0: retriever: POST ${failing.url}: answered 500: Internal Server Error \\(gave up after 2 attempts\\)`));
      assert.deepEqual(checkpoints('failing'), []);
    } finally {
      console.error = logged;
      await failing.close();
    }
    const gone = await startRetrieverServer(new RecordingRetriever());
    await gone.close();
    const down = await cli(smoke('down', `model.path=${searcher}`, `env.search.train=${fixture('train.jsonl')}`, `env.search.test=${fixture('test.jsonl')}`, `env.search.retriever.url=${gone.url}`,
      'env.search.retriever.retries=0'));
    assert.equal(down.code, 1, down.out);
    assert.match(down.out, new RegExp(`error: retriever: POST ${gone.url}: cannot reach the server`));
    assert.doesNotMatch(down.out, /GPU:/);
  });

  test('a run given only its training file is refused before it starts, naming the file validation needs', slow, async () => {
    const r = await cli(['train', 'examples/grpo_search.yaml', `output.dir=${out}`, 'output.runName=train-only', `env.search.train=${fixture('train.jsonl')}`]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /env\.search\.validation: required: the run's validation plays valid_seen \(validation\.split\): its questions come from env\.search\.validation or env\.search\.test, and the question files given are for train only/);
    assert.doesNotMatch(r.out, /GPU:/);
    assert.ok(!fs.existsSync(path.join(out, 'train-only')), 'no run directory');
    const test = await cli(['train', 'examples/grpo_search.yaml', `output.dir=${out}`, 'output.runName=test-only', `env.search.test=${fixture('test.jsonl')}`]);
    assert.equal(test.code, 1, test.out);
    assert.match(test.out, /env\.search\.train: required: the run's training plays train \(env\.trainSplit\): its questions come from env\.search\.train,/);
  });
});
