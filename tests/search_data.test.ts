// Search-R1's question files as its data scripts write them: tests/fixtures/search_r1/
// holds a train and a test split made by make_search_r1.py with Hugging Face datasets
// (to_parquet and to_json, as qa_search_*_merge.py save them), and SDAR's re-processed
// test split; all of them give the same questions.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { EnvInputError } from '../envs/errors.ts';
import { loadQuestions, qaExampleOf } from '../envs/search/dataset.ts';
import { searchEnvironmentFrom, searchOptions } from '../envs/search/options.ts';
import { loadConfig } from '../src/config/config.ts';

const FIXTURES = join(import.meta.dirname, 'fixtures', 'search_r1');
const fixture = (name: string) => join(FIXTURES, name);

const TEST_QUESTIONS = [
  { question: 'who painted the ceiling of the sistine chapel?', golden_answers: ['Michelangelo'], data_source: 'nq' },
  { question: 'what is the capital of japan?', golden_answers: ['Tokyo', '東京'], data_source: 'nq' },
  { question: 'how many strings does a violin have?', golden_answers: ['four', '4'], data_source: 'nq' },
  { question: 'What language is spoken in the country whose capital is Lima?', golden_answers: ['Spanish'], data_source: 'hotpotqa' },
  { question: 'Who directed the film in which Ingrid Bergman played Ilsa Lund?', golden_answers: ['Michael Curtiz'], data_source: 'hotpotqa' },
];

describe('Search-R1 question files', () => {
  test('parquet and JSON lines as nq_search.py writes them, and SDAR\'s copies, give the same questions', async () => {
    assert.deepEqual(await loadQuestions(fixture('test.parquet')), TEST_QUESTIONS);
    assert.deepEqual(await loadQuestions(fixture('test.jsonl')), TEST_QUESTIONS);
    assert.deepEqual(await loadQuestions(fixture('test_sdar.parquet')), TEST_QUESTIONS);
    const train = await loadQuestions(fixture('train.parquet'));
    assert.deepEqual(train, await loadQuestions(fixture('train.jsonl')));
    assert.deepEqual(train.map((q) => q.data_source), ['nq', 'nq', 'nq', 'hotpotqa', 'hotpotqa']);
    assert.deepEqual(train[0], { question: 'who wrote the novel nineteen eighty-four?', golden_answers: ['George Orwell', 'Eric Arthur Blair'], data_source: 'nq' });
  });

  test('the gold answers are what Search-R1 scores against: reward_model.ground_truth.target before golden_answers', () => {
    const row = { question: 'q?', golden_answers: ['old'], data_source: 'nq', reward_model: { style: 'rule', ground_truth: { target: ['new', 'newer'] } } };
    assert.deepEqual(qaExampleOf(row, 'row').golden_answers, ['new', 'newer']);
    assert.deepEqual(qaExampleOf({ extra_info: { question: 'q?' }, env_kwargs: { ground_truth: { target: 'one' }, data_source: 'musique' } }, 'row'), { question: 'q?', golden_answers: ['one'], data_source: 'musique' });
    assert.throws(() => qaExampleOf({ prompt: [{ role: 'user', content: 'q?' }], golden_answers: ['a'] }, 'f.parquet row 3'), /f\.parquet row 3: no question \(expected a non-empty string in question, extra_info\.question or env_kwargs\.question\)/);
    assert.throws(() => qaExampleOf({ question: 'q?' }, 'row'), /no gold answers/);
    assert.throws(() => qaExampleOf({ question: 'q?', reward_model: { ground_truth: { target: [] } } }, 'row'), /reward_model\.ground_truth\.target must be a string or a non-empty list of strings, got \[\]/);
    assert.throws(() => qaExampleOf({ question: 'q?', golden_answers: ['a'], data_source: 7 }, 'row'), /data_source must be a string/);
  });

  test('a file that is missing, not parquet or empty is refused naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'search-files-'));
    try {
      await assert.rejects(loadQuestions(join(dir, 'none.parquet')), (e: Error) => e instanceof EnvInputError && e.message === `questions ${join(dir, 'none.parquet')}: no such file`);
      writeFileSync(join(dir, 'bad.parquet'), 'not parquet at all');
      await assert.rejects(loadQuestions(join(dir, 'bad.parquet')), new RegExp(`questions ${join(dir, 'bad.parquet')}: not a parquet file hyparquet can read`));
      writeFileSync(join(dir, 'empty.jsonl'), '\n');
      await assert.rejects(loadQuestions(join(dir, 'empty.jsonl')), /empty\.jsonl: no rows/);
      await assert.rejects(loadQuestions(join(dir, 'none.jsonl')), /questions .*none\.jsonl: cannot read it/);
      assert.throws(() => loadConfig(undefined, ['env.name=search', `env.search.train=${join(dir, 'none.parquet')}`]), /env\.search\.train.*no such file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a panel of as many seeds as the test file has rows plays each row once; training draws from the train file', async () => {
    const env = searchEnvironmentFrom(searchOptions.parse({ train: fixture('train.parquet'), test: fixture('test.parquet'), corpus: fixture('corpus.jsonl') }));
    await env.check();
    assert.equal(await env.taskCount('valid_unseen'), 5);
    assert.equal(await env.taskCount('train'), 5);
    const panel = await Promise.all([0, 1, 2, 3, 4].map((i) => env.create({ split: 'valid_seen', seed: 1_000_000 + i })));
    assert.deepEqual(panel.map((s) => s.task).sort(), TEST_QUESTIONS.map((q) => q.question).sort());
    assert.deepEqual(new Set(panel.map((s) => s.question.task_type)), new Set(['nq', 'hotpotqa']));
    const train = new Set((await loadQuestions(fixture('train.jsonl'))).map((q) => q.question));
    for (let seed = 0; seed < 20; seed++) assert.ok(train.has((await env.create({ split: 'train', seed: seed * 7919 })).task));
  });
});
