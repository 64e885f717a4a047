import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EnvInputError, EpisodeDoneError } from '../envs/errors.ts';
import { catalogue, type Product } from '../envs/shop/catalogue.ts';
import { ShopEnvironment, ShopSession, parseShopTask } from '../envs/shop/env.ts';
import { fuzzyMatch, tokenSetRatio } from '../envs/shop/fuzzy.ts';
import { drawGoal, HELD_OUT_TYPES, targetPool } from '../envs/shop/goals.ts';
import { parseShopAction, renderShopPrompt } from '../envs/shop/prompt.ts';
import { shopReward, type ShopGoal } from '../envs/shop/reward.ts';
import { shopSearchEngine } from '../envs/shop/search_engine.ts';
import { shopKeywordSkills, SHOP_TASK_KEYWORDS, SHOP_TASK_TYPES } from '../envs/shop/skills.ts';
import { CATEGORIES, EXACT_MATCH_OPTIONS } from '../envs/shop/vocabulary.ts';
import { SPLITS, type StepResult } from '../src/envs/types.ts';

const env = new ShopEnvironment();

function runExpert(session: ShopSession): { steps: StepResult[]; actions: string[] } {
  let info = session.reset().info;
  const steps: StepResult[] = [];
  const actions: string[] = [];
  for (;;) {
    const action = info.expert_action as string;
    actions.push(action);
    const r = session.step(action);
    steps.push(r);
    info = r.info;
    if (r.done) return { steps, actions };
  }
}

function productText(p: Product): string {
  return [p.title, p.features.join(' '), p.description].join(' ').toLowerCase();
}

const phoneCase: Product = {
  asin: 'B0TEST0001',
  category: 'phone_accessories',
  query: 'phone case',
  typeName: 'phone case',
  productCategory: 'Cell Phones & Accessories › Cases & Covers',
  title: 'Lumora Phone Case, Shockproof',
  price: 19.99,
  attributes: ['shockproof', 'slim fit', 'raised edges'],
  options: { color: ['black', 'navy'], size: ['small', 'large'] },
  description: 'This phone case from Lumora is shockproof, slim fit and raised edges.',
  features: ['Shockproof for peace of mind', 'Slim fit for years of use', 'Raised edges for everyday comfort'],
  reviews: [],
};

const goal: ShopGoal = {
  asin: phoneCase.asin,
  category: phoneCase.category,
  query: phoneCase.query,
  name: phoneCase.title,
  product_category: phoneCase.productCategory,
  instruction_text: 'i need a shockproof slim fit phone case with color: black, and size: large, and price lower than 30.00 dollars',
  attributes: ['shockproof', 'slim fit'],
  goal_options: { color: 'black', size: 'large' },
  price_upper: 30,
};

describe('shop catalogue', () => {
  test('has over a thousand products with ASIN-like ids in every category', () => {
    const products = catalogue();
    assert.ok(products.length >= 1000, `${products.length} products`);
    assert.equal(new Set(products.map((p) => p.asin)).size, products.length);
    for (const p of products) assert.match(p.asin, /^B0[0-9A-Z]{8}$/);
    assert.deepEqual(new Set(products.map((p) => p.category)), new Set(CATEGORIES.map((c) => c.slug)));
  });

  test('is the same on every machine (pinned fingerprint)', () => {
    const products = catalogue();
    assert.equal(products[0].asin, 'B0CH2MLJFG');
    assert.equal(products[0].title, 'Voltana Screen Protector, Case Friendly');
    assert.equal(drawGoal('train', 0).instruction_text, 'find me lace up hiking boots in gray color and in size 9, and price lower than 170.00 dollars');
  });

  test('no two attributes of a type or two values of an option group fuzzy-match', () => {
    for (const c of CATEGORIES) {
      for (const t of c.types) {
        for (const [label, list] of [['attributes', t.attributes], ...Object.entries(t.options)] as [string, readonly string[]][]) {
          for (let i = 0; i < list.length; i++) {
            for (let j = i + 1; j < list.length; j++) {
              assert.notEqual(list[i], list[j]);
              // Size values are compared exactly, every other list fuzzily.
              if (!EXACT_MATCH_OPTIONS.includes(label)) assert.ok(!fuzzyMatch(list[i], list[j]), `${t.query} ${label}: ${list[i]} ~ ${list[j]}`);
              if (label === 'attributes') assert.ok(!list[i].includes(list[j]) && !list[j].includes(list[i]), `${list[i]} / ${list[j]}`);
            }
          }
        }
      }
    }
  });

  test("a product's text names none of its option values and no attribute it lacks", () => {
    for (const p of catalogue()) {
      const text = productText(p);
      for (const v of Object.values(p.options).flat()) assert.ok(!text.includes(v), `${p.asin} text contains option ${v}`);
      const type = CATEGORIES.flatMap((c) => c.types).find((t) => t.query === p.query)!;
      for (const a of type.attributes) {
        if (!p.attributes.includes(a)) assert.ok(!text.includes(a), `${p.asin} text contains missing attribute ${a}`);
      }
    }
  });
});

describe('shop score (WebShop get_reward)', () => {
  test('token_set_ratio follows thefuzz', () => {
    assert.equal(tokenSetRatio('new york mets vs atlanta braves', 'atlanta braves vs new york mets'), 100);
    assert.equal(tokenSetRatio('Slim-Fit', 'slim fit'), 100);
    assert.equal(tokenSetRatio('pack of 2', 'pack of 3'), 89);
    assert.equal(tokenSetRatio('water resistant', 'wind resistant'), 78);
    assert.equal(tokenSetRatio('', 'x'), 0);
  });

  test('a perfect purchase scores 1', () => {
    assert.equal(shopReward(phoneCase, goal, 19.99, { color: 'black', size: 'large' }).score, 1);
  });

  test('partial attributes and options count per item', () => {
    const oneAttr = { ...goal, attributes: ['shockproof', 'drop protection'] };
    const s = shopReward(phoneCase, oneAttr, 19.99, { color: 'black', size: 'large' });
    assert.equal(s.score, 4 / 5);
    assert.equal(s.r_att, 0.5);
    const wrongSize = shopReward(phoneCase, goal, 19.99, { color: 'black', size: 'small' });
    assert.equal(wrongSize.score, 4 / 5);
    assert.equal(wrongSize.r_option, 0.5);
    assert.equal(shopReward(phoneCase, goal, 19.99, { color: 'black' }).score, 4 / 5);
    assert.equal(shopReward(phoneCase, goal, 19.99, {}).score, 3 / 5);
  });

  test('over budget loses the price term', () => {
    const s = shopReward(phoneCase, goal, 30.01, { color: 'black', size: 'large' });
    assert.equal(s.r_price, false);
    assert.equal(s.score, 4 / 5);
    assert.equal(shopReward(phoneCase, goal, 30, { color: 'black', size: 'large' }).score, 1);
  });

  test('the type reward scales everything: 1, 0.5, 0.1, 0', () => {
    const stand: Product = { ...phoneCase, query: 'phone stand', productCategory: 'Cell Phones & Accessories › Stands & Mounts', title: 'Quillon Phone Stand, Shockproof' };
    // One shared title noun of three: 1/3 > 0.2, full type credit.
    assert.equal(shopReward(stand, goal, 19.99, { color: 'black', size: 'large' }).r_type, 1);
    const manyNouns = (brands: string[]) => ({ ...goal, name: `${brands.join(' ')} Phone Case` });
    // 1 of 6 nouns shared (0.17), no query or category match: half credit.
    const half = shopReward(stand, manyNouns(['Lumora', 'Orbisk', 'Nexilo', 'Cadenza']), 19.99, { color: 'black', size: 'large' });
    assert.equal(half.r_type, 0.5);
    assert.equal(half.score, 0.5);
    const tenth = shopReward(stand, manyNouns(['Lumora', 'Orbisk', 'Nexilo', 'Cadenza', 'Kestrix', 'Voltana', 'Pivora', 'Fennick', 'Solvane']), 19.99, { color: 'black', size: 'large' });
    assert.equal(tenth.r_type, 0.1);
    const towel: Product = { ...phoneCase, category: 'home_kitchen', query: 'bath towel', productCategory: 'Home & Kitchen › Towels', title: 'Hearthly Bath Towel, Shockproof' };
    assert.equal(shopReward(towel, goal, 19.99, { color: 'black', size: 'large' }).score, 0);
  });

  test('a fuzzy-matched color and a color named in the product text count', () => {
    assert.equal(shopReward(phoneCase, goal, 19.99, { color: 'Black', size: 'large' }).score, 1);
    const titled = { ...phoneCase, title: 'Lumora Phone Case, Navy Trim' };
    assert.equal(shopReward(titled, goal, 19.99, { color: 'navy', size: 'large' }).score, 1);
  });
});

describe('shop environment', () => {
  test('the expert wins every task of 200 seeds in each split', () => {
    for (const split of SPLITS) {
      for (let seed = 0; seed < 200; seed++) {
        const session = env.create({ split, seed });
        const { steps } = runExpert(session);
        const last = steps[steps.length - 1];
        assert.equal(last.info.won, true, `${split}/${seed}: ${session.task} scored ${String(last.info.score)}`);
        assert.equal(last.reward, 10);
        assert.equal(last.info.score, 1);
        assert.ok(steps.length <= env.maxSteps);
        assert.ok(steps.slice(0, -1).every((s) => s.reward === 0 && !s.done));
      }
    }
  });

  test('the same seed gives the same task and episode; splits use disjoint targets', () => {
    const a = env.create({ split: 'train', seed: 42 });
    const b = env.create({ split: 'train', seed: 42 });
    assert.equal(a.task, b.task);
    assert.deepEqual(a.goal, b.goal);
    assert.deepEqual(runExpert(a).steps, runExpert(b).steps);
    assert.notEqual(env.create({ split: 'valid_seen', seed: 42 }).task, a.task);
    const train = new Set(targetPool('train').map((p) => p.asin));
    assert.ok(targetPool('valid_seen').every((p) => !train.has(p.asin) && !HELD_OUT_TYPES.includes(p.query)));
    assert.ok(targetPool('valid_unseen').every((p) => HELD_OUT_TYPES.includes(p.query)));
    assert.ok(targetPool('train').every((p) => !HELD_OUT_TYPES.includes(p.query)));
  });

  test('pages, clickables and WebShop text format', () => {
    const session = env.create({ split: 'train', seed: 3 });
    const reset = session.reset();
    assert.equal(reset.observation, 'Search');
    assert.deepEqual(reset.admissible_actions, ['search[<your query>]']);
    const results = session.step('search[black waterproof]');
    assert.match(results.observation, /^Back to Search \[SEP\] Page 1 \(Total results: 50\) \[SEP\] Next > \[SEP\] B0[0-9A-Z]{8} \[SEP\] /);
    assert.ok(results.admissible_actions.includes('click[next >]'));
    assert.ok(!results.admissible_actions.includes('click[< prev]'));
    assert.ok(!results.admissible_actions.some((a) => a.startsWith('search[')));
    const page2 = session.step('click[next >]');
    assert.match(page2.observation, /^Back to Search \[SEP\] Page 2 \(Total results: 50\) \[SEP\] < Prev \[SEP\] Next > \[SEP\] /);
    const asin = page2.admissible_actions.find((a) => /^click\[b0/.test(a))!;
    const item = session.step(asin);
    assert.match(item.observation, /^Back to Search \[SEP\] < Prev \[SEP\] .* \[SEP\] Price: \$\d+\.\d\d \[SEP\] Rating: N\.A\. \[SEP\] Description \[SEP\] Features \[SEP\] Reviews \[SEP\] Buy Now$/);
    for (const a of ['click[description]', 'click[features]', 'click[reviews]', 'click[buy now]', 'click[< prev]', 'click[back to search]']) {
      assert.ok(item.admissible_actions.includes(a), a);
    }
    const features = session.step('click[features]');
    assert.deepEqual(features.admissible_actions, ['click[back to search]', 'click[< prev]']);
    assert.equal(session.step('click[< prev]').observation, item.observation);
    assert.equal(session.step('click[< prev]').observation, page2.observation);
  });

  test('inadmissible actions change nothing; the cap ends the episode unwon', () => {
    const session = env.create({ split: 'valid_seen', seed: 5 });
    session.reset();
    const results = session.step('search[phone case]');
    for (const bad of ['click[buy now]', 'search[]', 'jump', 'click[]', '']) {
      const r = session.step(bad);
      assert.equal(r.observation, 'Nothing happens.');
      assert.deepEqual(r.admissible_actions, results.admissible_actions);
      assert.equal(r.reward, 0);
    }
    let last: StepResult | undefined;
    for (let i = 6; i < env.maxSteps; i++) last = session.step('click[next >]');
    assert.equal(last!.done, true);
    assert.equal(last!.info.won, false);
    assert.equal(last!.reward, 0);
    assert.throws(() => session.step('click[next >]'), EpisodeDoneError);
  });

  test('search works from any page, as WebShop runs it, though only the search page lists it', () => {
    const session = env.create({ split: 'valid_seen', seed: 5 });
    session.reset();
    const results = session.step('search[phone case]');
    assert.ok(!results.admissible_actions.some((a) => a.startsWith('search[')));
    const again = session.step('search[red shoes]');
    assert.notEqual(again.observation, 'Nothing happens.');
    assert.match(again.observation, /^Back to Search \[SEP\] Page 1 \(Total results: \d+\)/);
  });

  test('the instruction header starts every page when asked for, as WebShop\'s pages', () => {
    const headed = new ShopEnvironment({ instructionHeader: true }).create({ split: 'valid_seen', seed: 5 });
    const first = headed.reset();
    assert.equal(first.observation, `WebShop [SEP] Instruction: [SEP] ${headed.task} [SEP] Search`);
    const results = headed.step('search[phone case]');
    assert.ok(results.observation.startsWith(`Instruction: [SEP] ${headed.task} [SEP] Back to Search [SEP] Page 1`), results.observation.slice(0, 120));
    assert.deepEqual(results.admissible_actions, env.create({ split: 'valid_seen', seed: 5 }).step('search[phone case]').admissible_actions);
  });

  test('buying with a wrong option scores below 1 and earns nothing', () => {
    const session = env.create({ split: 'train', seed: 11 });
    const { actions } = runExpert(env.create({ split: 'train', seed: 11 }));
    session.reset();
    let r: StepResult | undefined;
    for (const a of actions.slice(0, -1)) if (!Object.values(session.goal.goal_options).some((v) => a === `click[${v}]`)) r = session.step(a);
    r = session.step('click[buy now]');
    assert.equal(r.done, true);
    assert.equal(r.reward, 0);
    assert.equal(r.info.won, false);
    const n = session.goal.attributes.length + Object.keys(session.goal.goal_options).length + 1;
    assert.equal(r.info.score, (session.goal.attributes.length + 1) / n);
  });

  test('explicit tasks are validated and fill product fields from the catalogue', () => {
    const drawn = drawGoal('valid_unseen', 9);
    const json = JSON.parse(JSON.stringify({ asin: drawn.asin, instruction_text: drawn.instruction_text, attributes: drawn.attributes, goal_options: drawn.goal_options, price_upper: drawn.price_upper }));
    assert.deepEqual(parseShopTask(json), drawn);
    const session = env.create({ split: 'train', seed: 0, task: json });
    assert.equal(runExpert(session).steps.at(-1)!.info.won, true);
    assert.throws(() => parseShopTask({ asin: 'B0NOPE', instruction_text: 'x', attributes: [], goal_options: {}, price_upper: 10 }), EnvInputError);
    assert.throws(() => parseShopTask({ asin: drawn.asin }), EnvInputError);
    assert.throws(() => env.create({ split: 'train', seed: 1.5 }), EnvInputError);
  });

  test('search finds products by type and attribute words', () => {
    const hits = shopSearchEngine().search('waterproof hiking boots', 10);
    assert.equal(hits.length, 10);
    assert.ok(hits.every((p) => p.query === 'hiking boots' && p.attributes.includes('waterproof')));
  });
});

describe('shop prompt, parser and skills', () => {
  const history = [
    { observation: 'Search', action: 'search[phone case]' },
    { observation: 'Back to Search [SEP] Page 1 (Total results: 50)', action: 'click[b0abc]' },
    { observation: 'Back to Search [SEP] < Prev [SEP] color', action: 'click[black]' },
  ];

  test('the prompt shows the task, step count, the last two turns and the admissible actions', () => {
    const prompt = renderShopPrompt({ task: goal.instruction_text, history, observation: 'Item page', admissibleActions: ['click[buy now]', 'click[< prev]'] });
    assert.ok(renderShopPrompt({ task: goal.instruction_text, history, observation: 'Item page', admissibleActions: [], historyLength: 3 }).includes("Action 1: 'search[phone case]'"));
    assert.ok(prompt.startsWith('You are an expert agent operating in the WebShop online store.'));
    assert.ok(prompt.includes(`Your task is to: ${goal.instruction_text}.`));
    assert.ok(prompt.includes('You have already taken 3 step(s)'));
    assert.ok(!prompt.includes("Action 1: 'search[phone case]'"));
    assert.ok(prompt.includes("[Observation 2: 'Back to Search [SEP] Page 1 (Total results: 50)', Action 2: 'click[b0abc]']"));
    assert.ok(prompt.includes("Action 3: 'click[black]'"));
    assert.ok(prompt.includes('You are now at step 4 and your current observation is: Item page'));
    assert.ok(prompt.includes("[\n'click[buy now]',\n'click[< prev]'\n]"));
    assert.ok(prompt.includes('<think> </think>') && prompt.includes('<action> </action>'));
    const first = renderShopPrompt({ task: 'x', history: [], observation: 'Search', admissibleActions: ['search[<your query>]'] });
    assert.ok(!first.includes('already taken'));
    assert.ok(first.includes('step 1 '));
  });

  test('the skills block goes first; cards are chosen by keywords over the prompt, several when several match', () => {
    const general = shopKeywordSkills('nothing to see');
    assert.ok(general.startsWith('# Shopping: general rules'));
    for (const [type, keywords] of SHOP_TASK_KEYWORDS) {
      assert.ok(SHOP_TASK_TYPES.includes(type));
      const skill = shopKeywordSkills(`i need a ${keywords[0].toUpperCase()} under 40 dollars`);
      assert.ok(skill.startsWith(general) && skill.length > general.length, type);
      const prompt = renderShopPrompt({ task: 'x', history: [], observation: 'Search', admissibleActions: [], skills: skill });
      assert.ok(prompt.startsWith(`[Privileged Skill Information]\n${skill}\n\nYou are an expert agent`));
    }
    // The instruction asks for running shoes; the results page also lists a phone case.
    const both = shopKeywordSkills('Instruction: running shoes in size 9 [SEP] B0X1 [SEP] Rugged Phone Case');
    assert.ok(both.includes('# Footwear') && both.includes('# Phone accessories'));
    assert.ok(both.indexOf('# Phone accessories') < both.indexOf('# Footwear'), 'in the table\'s order');
  });

  test('action parsing and validity (the household turn format)', () => {
    const ok = parseShopAction('<think>buy it</think><action>Click[Buy Now]</action>');
    assert.equal(ok.action, 'click[buy now]');
    assert.equal(ok.valid, true);
    assert.equal(parseShopAction('<think>a</think> <action> search[red shoes] </action> <action>click[x]</action>').action, 'search[red shoes]');
    // As webshop_projection: the action is sent whatever the validity; without both
    // action tags the last 20 characters of the lower-cased response go instead.
    const cases: [string, string, boolean][] = [
      ['<action>click[x]</action>', 'click[x]', false],
      ['<think>a</think>Click[Item Number 4]', 'k>click[item number 4]'.slice(-20), false],
      ['<think>a</think><action>click[x]', '</think><action>click[x]'.slice(-20), false],
      ['<think>a</think></action>click[x]<action>', '', true],
      ['<think>买</think><action>click[x]</action>', 'click[x]', false],
      ['<think>カート</think><action>click[x]</action>', 'click[x]', true],
      ['', '', false],
    ];
    for (const [text, action, valid] of cases) {
      const p = parseShopAction(text);
      assert.deepEqual([p.action, p.valid], [action, valid], text);
    }
  });
});
