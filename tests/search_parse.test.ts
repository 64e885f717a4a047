// The search turn read as Search-R1's generation.py (_postprocess_responses, then
// postprocess_predictions) and SDAR's search_projection read it. Each expectation is
// what the reference's own code returns for the response (run on Python 3.11 from
// their sources); the default reading of a run follows its method's reference.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { searchAgent } from '../envs/search/agent.ts';
import { resolveSearchOptions, searchOptions, searchReferenceOf } from '../envs/search/options.ts';
import { cutAfterAction, parseSdar, parseSearchR1 } from '../envs/search/parse.ts';
import { envOptionsOf, loadConfig, type TrainConfig } from '../src/config/config.ts';
import { agentSpec } from '../src/envs/environment.ts';

type Kind = 'search' | 'answer' | null;

interface ProbeCase {
  name: string;
  response: string;
  /** Search-R1: the response it keeps, the action and its content. */
  searchR1: [kept: string, kind: Kind, content: string];
  /** SDAR: the projected action and its validity flag. */
  sdar: [action: string, valid: boolean];
}

const CASES: ProbeCase[] = [
  {
    name: 'a search',
    response: '<think>I need the author.</think>\n<search> author of nineteen eighty-four </search>',
    searchR1: ['<think>I need the author.</think>\n<search> author of nineteen eighty-four </search>', 'search', 'author of nineteen eighty-four'],
    sdar: ['<search>author of nineteen eighty-four</search>', true],
  },
  {
    name: 'an answer',
    response: '<think>I know it.</think>\n<answer> George Orwell </answer>',
    searchR1: ['<think>I know it.</think>\n<answer> George Orwell </answer>', 'answer', 'George Orwell'],
    sdar: ['<answer>George Orwell</answer>', true],
  },
  {
    name: 'a hallucinated <information> and answer after a search',
    response: '<think>look it up</think>\n<search> capital of australia </search>\n<information>Doc 1(Title: Sydney) Sydney is the capital.</information>\n<think>so</think>\n<answer> Sydney </answer>',
    searchR1: ['<think>look it up</think>\n<search> capital of australia </search>', 'search', 'capital of australia'],
    sdar: ['<search>capital of australia</search>', false],
  },
  {
    name: 'a <search> echoed later in the reasoning',
    response: '<think>first</think>\n<search> tigris baghdad </search>\nAfter that I might <search> again',
    searchR1: ['<think>first</think>\n<search> tigris baghdad </search>', 'search', 'tigris baghdad'],
    sdar: ['<search>tigris baghdad</search>', false],
  },
  {
    name: 'two searches',
    response: '<search> rusalka composer </search>\n<search> dvorak birthplace </search>',
    searchR1: ['<search> rusalka composer </search>', 'search', 'rusalka composer'],
    sdar: ['<search>rusalka composer</search>', false],
  },
  {
    name: 'two answers',
    response: '<answer> Canberra </answer> or maybe <answer> Sydney </answer>',
    searchR1: ['<answer> Canberra </answer>', 'answer', 'Canberra'],
    sdar: ['<answer>Canberra</answer>', false],
  },
  {
    name: 'an answer, then a search',
    response: '<answer> Canberra </answer>\n<search> capital of australia </search>',
    searchR1: ['<answer> Canberra </answer>\n<search> capital of australia </search>', 'answer', 'Canberra'],
    sdar: ['<search>capital of australia</search>', false],
  },
  {
    name: 'a CJK answer',
    response: '<think>東京です</think>\n<answer> 東京 </answer>',
    searchR1: ['<think>東京です</think>\n<answer> 東京 </answer>', 'answer', '東京'],
    sdar: ['<answer>東京</answer>', true],
  },
  {
    name: 'a CJK query',
    response: '<think>日本の首都</think>\n<search> 日本の首都 </search>',
    searchR1: ['<think>日本の首都</think>\n<search> 日本の首都 </search>', 'search', '日本の首都'],
    sdar: ['<search>日本の首都</search>', true],
  },
  {
    name: 'an empty search',
    response: '<think>hmm</think>\n<search> </search>',
    searchR1: ['<think>hmm</think>\n<search> </search>', 'search', ''],
    sdar: ['<search></search>', true],
  },
  {
    name: 'an empty answer',
    response: '<answer></answer>',
    searchR1: ['<answer></answer>', 'answer', ''],
    sdar: ['<answer></answer>', true],
  },
  {
    name: 'no tags',
    response: 'I think the answer is Paris.',
    searchR1: ['I think the answer is Paris.', null, ''],
    sdar: ['', false],
  },
  {
    name: 'an unclosed search',
    response: '<think>x</think>\n<search> capital of peru',
    searchR1: ['<think>x</think>\n<search> capital of peru', null, ''],
    sdar: ['', false],
  },
  {
    name: 'a tag named in the reasoning before the block',
    response: '<think>I will use <search> tags</think>\n<search> lima language </search>',
    searchR1: ['<think>I will use <search> tags</think>\n<search> lima language </search>', 'search', 'tags</think>\n<search> lima language'],
    sdar: ['<search>tags</think>\n<search> lima language</search>', false],
  },
  {
    name: 'a closing tag before any block',
    response: '</search> then <search> lima </search>',
    searchR1: ['</search>', null, ''],
    sdar: ['', false],
  },
  {
    name: 'upper-case tags',
    response: '<Search> lima </Search>',
    searchR1: ['<Search> lima </Search>', null, ''],
    sdar: ['<search>lima</search>', true],
  },
  {
    name: 'an answer inside an unclosed search',
    response: '<search> peru <answer> Spanish </answer>',
    searchR1: ['<search> peru <answer> Spanish </answer>', 'answer', 'Spanish'],
    sdar: ['<answer>Spanish</answer>', false],
  },
];

const block = (kind: Kind, content: string) => (kind === null ? '' : content === '' ? `<${kind}> </${kind}>` : `<${kind}> ${content} </${kind}>`);
const sdarBlock = (projected: string) => {
  const m = /^<(search|answer)>([\s\S]*)<\/\1>$/.exec(projected);
  return m === null ? '' : block(m[1] as Kind, m[2]);
};

describe('search turns as the references read them', () => {
  test(`the ${CASES.length} probe cases act as Search-R1 acts on them`, () => {
    for (const c of CASES) {
      const [kept, kind, content] = c.searchR1;
      const p = parseSearchR1(c.response);
      assert.equal(p.kept, kept, c.name);
      assert.equal(cutAfterAction(c.response), kept, c.name);
      assert.deepEqual(p.parsed, kind === null ? null : kind === 'search' ? { kind, query: content } : { kind, answer: content }, c.name);
      // Search-R1 counts a turn as a valid action when it holds a search or an answer.
      assert.equal(p.valid, kind !== null, c.name);
      assert.equal(p.action, block(kind, content), c.name);
    }
  });

  test("a default search run (GRPO) keeps, sends and flags each case as Search-R1 does", () => {
    const spec = agentSpec(loadConfig(undefined, ['env.name=search']));
    for (const c of CASES) {
      const [kept, kind, content] = c.searchR1;
      const cut = spec.cutsAfterAction ? spec.cutResponse(c.response) : c.response;
      assert.equal(cut, kept, c.name);
      assert.deepEqual(spec.parse(cut), { send: block(kind, content), historyAction: block(kind, content), valid: kind !== null }, c.name);
    }
  });

  test('and as SDAR projects them: acted on, the whole response kept, extra tags flagged', () => {
    for (const c of CASES) {
      const [action, valid] = c.sdar;
      const p = parseSdar(c.response);
      assert.equal(p.kept, c.response, c.name);
      assert.equal(p.valid, valid, c.name);
      assert.equal(p.action, sdarBlock(action), c.name);
    }
  });

  test('the environment reads the block the agent sends as the agent read the response', () => {
    for (const c of CASES) {
      for (const p of [parseSearchR1(c.response), parseSdar(c.response)]) {
        if (p.parsed !== null) assert.deepEqual(parseSearchR1(p.action).parsed, p.parsed, c.name);
      }
    }
  });

  test('the turn contract: Search-R1 cuts the response after the action, SDAR keeps it; both send the action', () => {
    const cutting = searchAgent('search-r1');
    const keeping = searchAgent('sdar');
    assert.equal(cutting.cutsAfterAction, true);
    assert.equal(keeping.cutsAfterAction, false);
    const hallucinated = CASES[2].response;
    assert.equal(cutting.cutResponse(hallucinated), CASES[2].searchR1[0]);
    assert.deepEqual(cutting.parse(cutting.cutResponse(hallucinated)), { send: '<search> capital of australia </search>', historyAction: '<search> capital of australia </search>', valid: true });
    assert.deepEqual(keeping.parse(hallucinated), { send: '<search> capital of australia </search>', historyAction: '<search> capital of australia </search>', valid: false });
    assert.deepEqual(keeping.parse('no action'), { send: '', historyAction: '', valid: false });
  });

  test("a run's default reading follows its method's reference; the config can choose", () => {
    assert.deepEqual(['grpo', 'dr_grpo', 'sft', 'sdar', 'opsd', 'rlsd', 'skill_sd', 'skill_grpo', 'gigpo'].map(searchReferenceOf),
      ['search-r1', 'search-r1', 'search-r1', 'sdar', 'sdar', 'sdar', 'sdar', 'sdar', 'sdar']);
    const search = (cfg: TrainConfig) => envOptionsOf(cfg) as { parsing: string; resultFormat: string };
    const grpo = loadConfig(undefined, ['env.name=search']);
    assert.deepEqual([search(grpo).parsing, search(grpo).resultFormat], ['search-r1', 'search-r1']);
    assert.equal(agentSpec(grpo).cutsAfterAction, true);
    const sdar = loadConfig(undefined, ['env.name=search', 'method=sdar']);
    assert.deepEqual([search(sdar).parsing, search(sdar).resultFormat], ['sdar', 'verl-agent']);
    assert.equal(agentSpec(sdar).cutsAfterAction, false);
    const chosen = loadConfig(undefined, ['env.name=search', 'method=sdar', 'env.search.parsing=search-r1']);
    assert.deepEqual([search(chosen).parsing, search(chosen).resultFormat], ['search-r1', 'verl-agent']);
    assert.deepEqual(resolveSearchOptions(searchOptions.parse({ resultFormat: 'search-r1' }), 'rlsd').resultFormat, 'search-r1');
    assert.throws(() => loadConfig(undefined, ['env.name=search', 'env.search.parsing=cjk']), /env\.search\.parsing/);
  });
});
