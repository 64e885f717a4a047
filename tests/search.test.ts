import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { EnvInputError, EpisodeDoneError } from '../envs/errors.ts';
import { loadQuestions } from '../envs/search/dataset.ts';
import { builtInSearchData, INVALID_ACTION_MESSAGE, SEARCH_ACTIONS, SearchEnvironment, type SearchSession } from '../envs/search/env.ts';
import { searchExpertAction } from '../envs/search/expert.ts';
import { generate, generateSearchData } from '../envs/search/generate.ts';
import { loadCorpus } from '../envs/search/jsonl.ts';
import { exactMatch, normalizeAnswer } from '../envs/search/normalize.ts';
import { searchEnvironmentFrom, searchOptions } from '../envs/search/options.ts';
import { renderSearchPrompt } from '../envs/search/prompt.ts';
import { drawQuestion, parseQuestion, TEMPLATES } from '../envs/search/questions.ts';
import { formatInformation } from '../envs/search/result_format.ts';
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
  test('normalisation as qa_em.py: case, punctuation, articles, and the whitespace of Python\'s str.split()', () => {
    // Each expected value is Python 3.11's normalize_answer of the input.
    const cases: [string, string][] = [
      ['  The Eiffel-Tower! ', 'eiffeltower'],
      ['An apple a  day', 'apple day'],
      ['Theatre of the Absurd', 'theatre of absurd'],
      ['São Paulo', 'são paulo'],
      ['"1984."', '1984'],
      ['new\ufeffyork', 'new\ufeffyork'],
      ['new\u0085york', 'new york'],
      ['new\u001cyork', 'new york'],
      ['new\u001fyork', 'new york'],
      ['new\u00a0york', 'new york'],
      ['new\u200byork', 'new\u200byork'],
      ['\u3000Tokyo\u3000', 'tokyo'],
      ['東京', '東京'],
      ['ÉCOLE the école', 'école école'],
      ['the_a an', 'thea'],
      ['a\u0301 b', '\u0301 b'],
      ['Ｔｈｅ Beatles', 'ｔｈｅ beatles'],
      ['ΟΔΟΣ', 'οδος'],
      ['İstanbul', 'i\u0307stanbul'],
    ];
    for (const [input, expected] of cases) assert.equal(normalizeAnswer(input), expected, JSON.stringify(input));
  });

  test('exact match against any gold answer', () => {
    assert.ok(exactMatch('the Beatles', ['The Beatles']));
    assert.ok(exactMatch('Marrow', ['Marrow Freight', 'Marrow']));
    assert.ok(exactMatch('paris.', ['London', 'Paris']));
    assert.ok(exactMatch('東京', ['Tokyo', '東京']));
    assert.ok(!exactMatch('Paris, France', ['Paris']));
    assert.ok(!exactMatch('', ['Paris']));
  });
});

describe('search environment', () => {
  test('the expert wins every task of 200 seeds in each split', async () => {
    for (const split of SPLITS) {
      for (let seed = 0; seed < 200; seed++) {
        const session = await env.create({ split, seed });
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
    const a = await env.create({ split: 'valid_unseen', seed: 17 });
    const b = await env.create({ split: 'valid_unseen', seed: 17 });
    assert.deepEqual(a.question, b.question);
    assert.deepEqual(await runExpert(a), await runExpert(b));
    assert.notEqual((await env.create({ split: 'train', seed: 17 })).task, a.task);
  });

  test('the expert reads the documents, not the gold answer; a question it cannot parse gets retrieve-and-read', () => {
    const question = 'in which country was Foo Bar born?';
    assert.equal(searchExpertAction(question, []), '<search> Foo Bar born </search>');
    const docs = [
      { id: 'a', contents: '"Qux Bar"\nQux Bar was born in Elsewhere in 1960.' },
      { id: 'b', contents: '"Foo Bar"\nFoo Bar was born in Nowhereville in 1950.' },
    ];
    assert.equal(searchExpertAction(question, docs), '<search> Nowhereville city </search>');
    const more = [...docs, { id: 'c', contents: '"Nowhereville"\nNowhereville is a city in Imaginaria.' }];
    assert.equal(searchExpertAction(question, more), '<answer> Imaginaria </answer>');
    assert.equal(searchExpertAction('who wrote the iliad?', []), '<search> who wrote the iliad? </search>');
    assert.equal(searchExpertAction('who wrote the iliad?', [{ id: 'h', contents: '"Iliad"\nThe Iliad is attributed to Homer.' }, ...more]), '<answer> Iliad </answer>');
  });

  test('results come back as Search-R1 renders them, or as SDAR does (verl-agent)', async () => {
    const session = await env.create({ split: 'train', seed: 4 });
    const reset = session.reset();
    assert.equal(reset.observation, session.task);
    assert.deepEqual(reset.admissible_actions, SEARCH_ACTIONS);
    const r = await session.step(`<think>look it up</think><search> ${parseQuestion(session.task)!.subject} </search>`);
    assert.match(r.observation, /^\n\n<information>Doc 1\(Title: "[^"]+"\) [^\n]+\nDoc 2\(Title: "[^"]+"\) [^\n]+\nDoc 3\(Title: "[^"]+"\) [^\n]+<\/information>\n\n$/);
    assert.equal(r.done, false);
    assert.equal(r.reward, 0);
    const hit = { document: { id: '7', contents: '"T"\nline one\nline two' }, score: 1 };
    assert.equal(formatInformation([hit]), '\n\n<information>Doc 1(Title: "T") line one\nline two</information>\n\n');
    // SDAR: json.dumps({"result": ...}) with ASCII escapes, the outer newlines stripped (Python 3.11 on SDAR's code gives these).
    assert.equal(formatInformation([hit, hit], 'verl-agent'), '<information>{"result": "Doc 1: \\"T\\"\\nline one\\nline two\\nDoc 2: \\"T\\"\\nline one\\nline two\\n"}</information>');
    const tokyo = { document: { id: '6', contents: '  "Tokyo"\nTokyo (東京) is the capital of Japan.\t😀\u007f\n' }, score: 1 };
    assert.equal(formatInformation([tokyo], 'verl-agent'), '<information>{"result": "Doc 1: \\"Tokyo\\"\\nTokyo (\\u6771\\u4eac) is the capital of Japan.\\t\\ud83d\\ude00\\u007f\\n"}</information>');
    assert.equal(formatInformation([], 'verl-agent'), '<information>{"result": ""}</information>');
    assert.equal(formatInformation([]), '\n\n<information></information>\n\n');
  });

  test('invalid turns cost a turn; four turns end the episode; a wrong answer scores 0; an empty search is sent', async () => {
    const session = await env.create({ split: 'train', seed: 8 });
    session.reset();
    const r1 = await session.step('<think>hmm</think> no tags here');
    assert.equal(r1.observation, INVALID_ACTION_MESSAGE);
    assert.equal(r1.info.valid, false);
    assert.equal(r1.done, false);
    const empty = await session.step('<search> </search>');
    assert.equal(empty.info.valid, true);
    assert.match(empty.observation, /^\n\n<information>/);
    await session.step('<search> anything </search>');
    const r4 = await session.step('<search> again </search>');
    assert.equal(r4.done, true);
    assert.equal(r4.reward, 0);
    assert.equal(r4.info.won, false);
    await assert.rejects(async () => session.step('<answer> x </answer>'), EpisodeDoneError);
    const wrong = await env.create({ split: 'train', seed: 8 });
    wrong.reset();
    const r = await wrong.step('<think>guess</think><answer> Atlantis </answer>');
    assert.equal(r.done, true);
    assert.equal(r.reward, 0);
    assert.equal(r.info.answer, 'Atlantis');
    const right = await env.create({ split: 'train', seed: 8 });
    right.reset();
    assert.equal((await right.step(`<answer> ${right.question.golden_answers[0].toUpperCase()}. </answer>`)).reward, 1);
  });

  test('explicit tasks and bad create options', async () => {
    const s = await env.create({ split: 'train', seed: 0, task: { question: 'who wrote the iliad?', golden_answers: ['Homer'], data_source: 'nq' } });
    assert.equal(s.task, 'who wrote the iliad?');
    const reset = s.reset();
    assert.equal(reset.info.task_type, 'nq');
    assert.equal(reset.info.expert_action, '<search> who wrote the iliad? </search>');
    const cjk = await env.create({ split: 'train', seed: 0, task: { question: 'capital of japan?', golden_answers: ['Tokyo', '東京'] } });
    cjk.reset();
    assert.equal((await cjk.step('<think>日本</think><answer> 東京 </answer>')).reward, 1);
    await assert.rejects(async () => env.create({ split: 'train', seed: 0, task: { question: 'q', golden_answers: [] } }), EnvInputError);
    await assert.rejects(async () => env.create({ split: 'train', seed: 0.5 }), EnvInputError);
    await assert.rejects(async () => env.create({ split: 'test' as 'train', seed: 0 }), EnvInputError);
    assert.equal(await env.taskCount('valid_seen'), null);
  });
});

describe('search data files', () => {
  test('generate writes JSONL that loads back unchanged and drives the environment', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'search-data-'));
    try {
      const { data, files } = generate(dir, { counts: { train: 40, valid_seen: 10, valid_unseen: 10 } });
      assert.deepEqual(loadCorpus(files.corpus), data.corpus);
      for (const s of SPLITS) assert.deepEqual(await loadQuestions(files[s]), data.splits[s]);
      const fromFiles = searchEnvironmentFrom(searchOptions.parse({ train: files.train, test: files.valid_unseen, corpus: files.corpus }));
      await fromFiles.check();
      assert.equal(await fromFiles.taskCount('valid_unseen'), 10);
      const seen = new Set<string>();
      for (let seed = 0; seed < 10; seed++) {
        const session = await fromFiles.create({ split: 'valid_unseen', seed });
        seen.add(session.task);
        const row = data.splits.valid_unseen.find((q) => q.question === session.task)!;
        assert.equal(session.question.task_type, row.data_source);
        assert.equal((await runExpert(session)).steps.at(-1)!.info.won, true);
      }
      // Ten consecutive seeds are the file's ten rows; the validation split stands in for the test file when it is the only held-out one.
      assert.equal(seen.size, 10);
      assert.equal((await fromFiles.create({ split: 'valid_seen', seed: 3 })).task, (await fromFiles.create({ split: 'valid_unseen', seed: 3 })).task);
      const trainOnly = searchEnvironmentFrom(searchOptions.parse({ train: files.train, corpus: files.corpus }));
      await assert.rejects(async () => trainOnly.create({ split: 'valid_seen', seed: 0 }), /no question file for split valid_seen \(set env\.search\.validation or env\.search\.test\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('malformed rows are refused with their line number', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'search-bad-'));
    try {
      const path = join(dir, 'bad.jsonl');
      writeFileSync(path, '{"question": "q", "golden_answers": ["a"], "data_source": "nq"}\n\n{not json}\n');
      await assert.rejects(loadQuestions(path), (e: Error) => e instanceof EnvInputError && e.message.includes('bad.jsonl:3'));
      writeFileSync(path, '{"question": "q", "golden_answers": 3}\n');
      await assert.rejects(loadQuestions(path), /bad\.jsonl:1: golden_answers must be a string or a non-empty list of strings, got 3/);
      writeFileSync(path, '{"id": 1, "contents": "\\"T\\"\\nbody"}\n{"id": 2}\n');
      assert.throws(() => loadCorpus(path), /bad.jsonl:2/);
      writeFileSync(path, '{"question": "q", "golden_answers": "a", "extra": 1}\n');
      assert.deepEqual(await loadQuestions(path), [{ question: 'q', golden_answers: ['a'], data_source: 'unknown' }]);
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
