import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { EnvInputError, EpisodeDoneError } from '../envs/errors.ts';
import {
  builtInSearchData, formatInformation, INVALID_ACTION_MESSAGE, SEARCH_ACTIONS, SearchEnvironment, searchEnvironmentFromFiles, type SearchSession,
} from '../envs/search/env.ts';
import { searchExpertAction } from '../envs/search/expert.ts';
import { generate, generateSearchData } from '../envs/search/generate.ts';
import { loadCorpus, loadDataset } from '../envs/search/jsonl.ts';
import { exactMatch, normalizeAnswer } from '../envs/search/normalize.ts';
import { parseSearchResponse } from '../envs/search/parse.ts';
import { renderSearchPrompt } from '../envs/search/prompt.ts';
import { drawQuestion, parseQuestion, TEMPLATES } from '../envs/search/questions.ts';
import { searchSkills } from '../envs/search/skills.ts';
import { generateWorld } from '../envs/search/world.ts';
import { SPLITS, type StepResult } from '../src/envs/types.ts';

const env = new SearchEnvironment();

async function runExpert(session: SearchSession): Promise<{ steps: StepResult[]; actions: string[] }> {
  let info = session.reset().info;
  const steps: StepResult[] = [];
  const actions: string[] = [];
  for (;;) {
    const action = info.expert_action as string;
    actions.push(action);
    const r = await session.step(action);
    steps.push(r);
    info = r.info;
    if (r.done) return { steps, actions };
  }
}

describe('search world and questions', () => {
  test('the world is the same on every machine (pinned fingerprint)', () => {
    const world = builtInSearchData().world;
    assert.equal(world.countries[0].name, 'Thoushfuthessa');
    assert.equal(world.people[0].name, generateWorld().people[0].name);
    assert.equal(drawQuestion(world, 'train', 1).question, 'what is the capital of Tevfoistan?');
    assert.deepEqual(drawQuestion(world, 'train', 1).golden_answers, ['Quairfemora']);
  });

  test('every template parses back to itself and the corpus has the title on the first line', () => {
    const world = builtInSearchData().world;
    for (const t of TEMPLATES) {
      const subject = t.subject === 'person' ? world.people[3].name : t.subject === 'organisation' ? world.organisations[3].name : t.subject === 'city' ? world.cities[3].name : world.countries[3].name;
      assert.deepEqual(parseQuestion(t.text.replace('{}', subject)), { template: t, subject });
    }
    assert.equal(parseQuestion('who wrote the iliad?'), null);
    for (const d of builtInSearchData().corpus) assert.match(d.contents, /^"[^"\n]+"\n\S/);
  });

  test('splits share no question and valid_unseen asks only about held-out subjects', () => {
    const data = generateSearchData({ counts: { train: 600, valid_seen: 150, valid_unseen: 150 } });
    const sets = SPLITS.map((s) => new Set(data.splits[s].map((q) => q.question)));
    for (const s of sets) assert.ok(s.size >= 150);
    for (let i = 0; i < 3; i++) for (let j = i + 1; j < 3; j++) for (const q of sets[i]) assert.ok(!sets[j].has(q), q);
    const trainSubjects = new Set(data.splits.train.map((q) => parseQuestion(q.question)!.subject));
    for (const q of data.splits.valid_unseen) assert.ok(!trainSubjects.has(parseQuestion(q.question)!.subject), q.question);
    assert.deepEqual(new Set(data.splits.train.map((q) => q.data_source)), new Set(['single_hop', 'two_hop']));
  });
});

describe('search answer scoring', () => {
  test('normalisation: case, punctuation, articles, whitespace', () => {
    assert.equal(normalizeAnswer('  The Eiffel-Tower! '), 'eiffeltower');
    assert.equal(normalizeAnswer('An apple a  day'), 'apple day');
    assert.equal(normalizeAnswer('Theatre of the Absurd'), 'theatre of absurd');
    assert.equal(normalizeAnswer('São Paulo'), 'são paulo');
    assert.equal(normalizeAnswer('"1984."'), '1984');
  });

  test('exact match against any gold answer', () => {
    assert.ok(exactMatch('the Beatles', ['The Beatles']));
    assert.ok(exactMatch('Marrow', ['Marrow Freight', 'Marrow']));
    assert.ok(exactMatch('paris.', ['London', 'Paris']));
    assert.ok(!exactMatch('Paris, France', ['Paris']));
    assert.ok(!exactMatch('', ['Paris']));
  });
});

describe('search turn parsing', () => {
  test('one search or one answer is valid; the response is cut after the first closing tag', () => {
    const s = parseSearchResponse('<think>need it</think><search> Foo Bar born </search>\n<information>made up</information>');
    assert.deepEqual(s.parsed, { kind: 'search', query: 'Foo Bar born' });
    assert.equal(s.valid, true);
    assert.equal(s.cut, '<think>need it</think><search> Foo Bar born </search>');
    assert.equal(s.action, '<search> Foo Bar born </search>');
    const a = parseSearchResponse('<think>known</think> <answer>Paris</answer> trailing');
    assert.deepEqual(a.parsed, { kind: 'answer', answer: 'Paris' });
    assert.equal(a.cut, '<think>known</think> <answer>Paris</answer>');
  });

  test('neither, both, twice, unclosed, empty or CJK is invalid', () => {
    for (const bad of [
      '<think>hmm</think> Paris',
      '<think>x</think><search>q</search><answer>a</answer>',
      '<think>x</think><answer>a</answer><search>q</search>',
      '<search>a</search><search>b</search>',
      '<answer>a</answer> <answer>b</answer>',
      '<think>x</think><search> q',
      '<search>   </search>',
      '<think>答案</think><answer>a</answer>',
      '',
    ]) {
      const p = parseSearchResponse(bad);
      assert.equal(p.valid, false, bad);
      assert.equal(p.parsed, null, bad);
      assert.equal(p.action, '', bad);
    }
  });
});

describe('search environment', () => {
  test('the expert wins every task of 200 seeds in each split', async () => {
    for (const split of SPLITS) {
      for (let seed = 0; seed < 200; seed++) {
        const session = env.create({ split, seed });
        const { steps } = await runExpert(session);
        const last = steps[steps.length - 1];
        assert.equal(last.info.won, true, `${split}/${seed}: ${session.task}`);
        assert.equal(last.reward, 1);
        assert.ok(steps.length <= env.maxSteps);
        // A two-hop question may take one search less when the first results also state the second fact.
        if (session.question.task_type === 'single_hop') assert.equal(steps.length, 2);
        else assert.ok(steps.length === 2 || steps.length === 3);
      }
    }
  });

  test('the same seed gives the same task and episode', async () => {
    const a = env.create({ split: 'valid_unseen', seed: 17 });
    const b = env.create({ split: 'valid_unseen', seed: 17 });
    assert.deepEqual(a.question, b.question);
    assert.deepEqual(await runExpert(a), await runExpert(b));
    assert.notEqual(env.create({ split: 'train', seed: 17 }).task, a.task);
  });

  test('the expert reads the documents, not the gold answer', () => {
    const question = 'in which country was Foo Bar born?';
    assert.equal(searchExpertAction(question, []), '<search> Foo Bar born </search>');
    const docs = [
      { id: 'a', contents: '"Qux Bar"\nQux Bar was born in Elsewhere in 1960.' },
      { id: 'b', contents: '"Foo Bar"\nFoo Bar was born in Nowhereville in 1950.' },
    ];
    assert.equal(searchExpertAction(question, docs), '<search> Nowhereville city </search>');
    const more = [...docs, { id: 'c', contents: '"Nowhereville"\nNowhereville is a city in Imaginaria.' }];
    assert.equal(searchExpertAction(question, more), '<answer> Imaginaria </answer>');
    assert.equal(searchExpertAction('who wrote the iliad?', more), null);
  });

  test('results come back in Search-R1 information format', async () => {
    const session = env.create({ split: 'train', seed: 4 });
    const reset = session.reset();
    assert.equal(reset.observation, session.task);
    assert.deepEqual(reset.admissible_actions, SEARCH_ACTIONS);
    const r = await session.step(`<think>look it up</think><search> ${parseQuestion(session.task)!.subject} </search>`);
    assert.match(r.observation, /^\n\n<information>Doc 1\(Title: "[^"]+"\) [^\n]+\nDoc 2\(Title: "[^"]+"\) [^\n]+\nDoc 3\(Title: "[^"]+"\) [^\n]+<\/information>\n\n$/);
    assert.equal(r.done, false);
    assert.equal(r.reward, 0);
    const hit = { document: { id: '7', contents: '"T"\nline one\nline two' }, score: 1 };
    assert.equal(formatInformation([hit]), '\n\n<information>Doc 1(Title: "T") line one\nline two</information>\n\n');
    // verl-agent's form, which the SDAR reference's search tool renders.
    assert.equal(formatInformation([hit, hit], 'verl-agent'), '\n<information>Doc 1: "T"\nline one\nline two\nDoc 2: "T"\nline one\nline two\n</information>\n');
  });

  test('invalid turns cost a turn; four turns end the episode; a wrong answer scores 0', async () => {
    const session = env.create({ split: 'train', seed: 8 });
    session.reset();
    const r1 = await session.step('<think>hmm</think> no tags here');
    assert.equal(r1.observation, INVALID_ACTION_MESSAGE);
    assert.equal(r1.info.valid, false);
    assert.equal(r1.done, false);
    await session.step('<search> a </search><search> b </search>');
    await session.step('<search> anything </search>');
    const r4 = await session.step('<search> again </search>');
    assert.equal(r4.done, true);
    assert.equal(r4.reward, 0);
    assert.equal(r4.info.won, false);
    await assert.rejects(async () => session.step('<answer> x </answer>'), EpisodeDoneError);
    const wrong = env.create({ split: 'train', seed: 8 });
    wrong.reset();
    const r = await wrong.step('<think>guess</think><answer> Atlantis </answer>');
    assert.equal(r.done, true);
    assert.equal(r.reward, 0);
    assert.equal(r.info.answer, 'Atlantis');
    const right = env.create({ split: 'train', seed: 8 });
    right.reset();
    assert.equal((await right.step(`<answer> ${right.question.golden_answers[0].toUpperCase()}. </answer>`)).reward, 1);
  });

  test('explicit tasks and bad create options', () => {
    const s = env.create({ split: 'train', seed: 0, task: { question: 'who wrote the iliad?', golden_answers: ['Homer'], data_source: 'nq' } });
    assert.equal(s.task, 'who wrote the iliad?');
    const reset = s.reset();
    assert.equal(reset.info.task_type, 'nq');
    assert.equal(reset.info.expert_action, null);
    assert.throws(() => env.create({ split: 'train', seed: 0, task: { question: 'q', golden_answers: [] } }), EnvInputError);
    assert.throws(() => env.create({ split: 'train', seed: 0.5 }), EnvInputError);
    assert.throws(() => env.create({ split: 'test' as 'train', seed: 0 }), EnvInputError);
  });
});

describe('search data files', () => {
  test('generate writes JSONL that loads back unchanged and drives the environment', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'search-data-'));
    try {
      const { data, files } = generate(dir, { counts: { train: 40, valid_seen: 10, valid_unseen: 10 } });
      assert.deepEqual(loadCorpus(files.corpus), data.corpus);
      for (const s of SPLITS) assert.deepEqual(loadDataset(files[s]), data.splits[s]);
      const fromFiles = searchEnvironmentFromFiles({ train: files.train, valid_unseen: files.valid_unseen, corpus: files.corpus });
      for (let seed = 0; seed < 12; seed++) {
        const session = fromFiles.create({ split: 'valid_unseen', seed });
        assert.equal(session.task, data.splits.valid_unseen[seed % 10].question);
        assert.equal(session.question.task_type, data.splits.valid_unseen[seed % 10].data_source);
        assert.equal((await runExpert(session)).steps.at(-1)!.info.won, true);
      }
      assert.throws(() => fromFiles.create({ split: 'valid_seen', seed: 0 }), EnvInputError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('malformed rows are refused with their line number', () => {
    const dir = mkdtempSync(join(tmpdir(), 'search-bad-'));
    try {
      const path = join(dir, 'bad.jsonl');
      writeFileSync(path, '{"question": "q", "golden_answers": ["a"], "data_source": "nq"}\n\n{not json}\n');
      assert.throws(() => loadDataset(path), (e: Error) => e instanceof EnvInputError && e.message.includes('bad.jsonl:3'));
      writeFileSync(path, '{"question": "q", "golden_answers": "a"}\n');
      assert.throws(() => loadDataset(path), /golden_answers/);
      writeFileSync(path, '{"id": 1, "contents": "\\"T\\"\\nbody"}\n{"id": 2}\n');
      assert.throws(() => loadCorpus(path), /bad.jsonl:2/);
      writeFileSync(path, '{"question": "q", "golden_answers": ["a"], "extra": 1}\n');
      assert.deepEqual(loadDataset(path), [{ question: 'q', golden_answers: ['a'], data_source: 'unknown' }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('search prompt and skills', () => {
  test('the prompt keeps the last four steps, each with what it returned', () => {
    const history = [
      { observation: 'where was X born?', action: '<search> q1 </search>' },
      { observation: '\n<information>R1</information>\n', action: '<search> q2 </search>' },
      { observation: '\n<information>R2</information>\n', action: '' },
      { observation: INVALID_ACTION_MESSAGE, action: '<search> q4 </search>' },
      { observation: '\n<information>R4</information>\n', action: '<search> q5 </search>' },
    ];
    const prompt = renderSearchPrompt({ task: 'where was X born?', history, observation: '\n<information>R5</information>\n', admissibleActions: SEARCH_ACTIONS });
    assert.ok(prompt.startsWith('You are an expert agent answering a question'));
    assert.ok(prompt.includes('Your question: where was X born?'));
    assert.ok(prompt.includes('You have already taken 5 step(s)'));
    assert.ok(!prompt.includes('q1') && !prompt.includes('R1'));
    assert.ok(prompt.includes('Step 2: <search> q2 </search>\n<information>R2</information>\n'));
    assert.ok(prompt.includes('Step 5: <search> q5 </search>\n<information>R5</information>\n'));
    assert.ok(prompt.includes('You are now at step 6.'));
    assert.ok(prompt.includes("'<search> your query </search>',\n'<answer> your answer </answer>'"));
    const first = renderSearchPrompt({ task: 'q?', history: [], observation: 'q?', admissibleActions: SEARCH_ACTIONS });
    assert.ok(!first.includes('already taken') && first.includes('You are now at step 1.'));
  });

  test('skills as the reference routes them: the teacher\'s card by data source, else (built-in questions, Skill-GRPO) the general card', () => {
    const general = searchSkills('unknown', 'teacher');
    assert.ok(general.startsWith('# Search QA: general rules'));
    assert.equal(searchSkills('single_hop', 'teacher'), general, 'a built-in question carries no data source');
    assert.ok(searchSkills('nq', 'teacher').includes('# Single-hop questions'));
    assert.ok(searchSkills('hotpotqa', 'teacher').includes('# Two-hop questions'));
    assert.equal(searchSkills('hotpotqa', 'policy'), general);
    const prompt = renderSearchPrompt({ task: 'q?', history: [], observation: 'q?', admissibleActions: SEARCH_ACTIONS, skills: searchSkills('musique', 'teacher') });
    assert.ok(prompt.startsWith(`[Privileged Skill Information]\n${searchSkills('musique', 'teacher')}\n\nYou are an expert agent`));
  });
});
