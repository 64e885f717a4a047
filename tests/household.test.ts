import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EnvInputError, EpisodeDoneError } from '../envs/errors.ts';
import { parseAction, type ParsedAction } from '../envs/think_action.ts';
import { COMBOS, LAYOUTS, TASK_TYPES, splitCombos, type TaskType } from '../envs/household/catalog.ts';
import { admissibleCommands } from '../envs/household/commands.ts';
import { HouseholdEnvironment, type HouseholdInfo, type HouseholdSession } from '../envs/household/env.ts';
import { expertPlan } from '../envs/household/expert.ts';
import { generateWorld } from '../envs/household/generate.ts';
import { isWon } from '../envs/household/goal.ts';
import { renderHouseholdPrompt } from '../envs/household/prompt.ts';
import { SKILL_HEADER } from '../src/envs/skills_block.ts';
import { householdKeywordSkills, householdSkillCard, householdSkills, usualPlacesCard } from '../envs/household/skills.ts';
import { householdAgent } from '../envs/household/agent.ts';
import { listing, NOTHING_HAPPENS } from '../envs/household/text.ts';
import type { Split, StepResult } from '../src/envs/types.ts';

const env = new HouseholdEnvironment();

interface Episode {
  taskType: string;
  won: boolean;
  steps: number;
  transcript: string[];
}

/** Plays the expert's advice from reset to the end, checking rewards and feedback along the way. */
function playExpert(split: Split, seed: number): Episode {
  const s = env.create({ split, seed });
  const first = s.reset();
  assert.equal(first.info.won, false, `${split}/${seed} starts won`);
  const transcript = [first.observation];
  let info = first.info as HouseholdInfo;
  let last: StepResult | null = null;
  while (info.expert_action !== null) {
    const action = info.expert_action;
    last = s.step(action);
    assert.notEqual(last.observation, NOTHING_HAPPENS, `${split}/${seed}: expert action "${action}" was not admissible`);
    assert.equal(last.reward, last.info.won ? 10 : 0, `${split}/${seed}: reward ${last.reward} at step ${s.stepCount}`);
    transcript.push(`> ${action}`, last.observation);
    info = last.info as HouseholdInfo;
    if (last.done) break;
  }
  return { taskType: first.info.task_type, won: last?.info.won === true && last.done, steps: s.stepCount, transcript };
}

/** Walks to a receptacle and opens it if needed. */
function reach(s: HouseholdSession, name: string): void {
  if (s.state().at !== name) assert.match(s.step(`go to ${name}`).observation, new RegExp(`^You arrive at ${name}\\. `));
  const r = s.state().receptacles.find((x) => x.name === name)!;
  if (r.openable && !r.open) assert.match(s.step(`open ${name}`).observation, new RegExp(`^You open the ${name}\\. The ${name} is open\\. In it, you see `));
}

function takeTaskObject(s: HouseholdSession): string {
  const w = s.state();
  const o = w.items.find((i) => i.type === w.task.object)!;
  reach(s, o.in!);
  assert.equal(s.step(`take ${o.name} from ${o.in}`).observation, `You pick up the ${o.name} from the ${o.in}.`);
  return o.name;
}

describe('household generator and expert', () => {
  test('the expert wins every train task of 200 seeds, all six task types represented', () => {
    const counts = Object.fromEntries(TASK_TYPES.map((t) => [t, 0])) as Record<TaskType, number>;
    for (let seed = 0; seed < 200; seed++) {
      const e = playExpert('train', seed);
      assert.ok(e.won, `train/${seed} (${e.taskType}) not won:\n${e.transcript.join('\n')}`);
      assert.ok(e.steps <= 50);
      counts[e.taskType as TaskType]++;
    }
    console.log('household train task types over 200 seeds:', JSON.stringify(counts));
    for (const t of TASK_TYPES) assert.ok(counts[t] >= 15, `only ${counts[t]} ${t} tasks in 200 train seeds`);
  });

  test('the expert wins held-out tasks on valid_seen and valid_unseen', () => {
    for (const split of ['valid_seen', 'valid_unseen'] as const) {
      const types = new Set<string>();
      for (let seed = 0; seed < 60; seed++) {
        const e = playExpert(split, seed);
        assert.ok(e.won, `${split}/${seed} (${e.taskType}) not won:\n${e.transcript.join('\n')}`);
        types.add(e.taskType);
      }
      assert.equal(types.size, 6, `${split}: only ${[...types]} in 60 seeds`);
    }
  });

  test('the same seed gives the same world, task and episode twice', () => {
    for (const split of ['train', 'valid_seen', 'valid_unseen'] as const) {
      for (const seed of [0, 7, 123456, 999_999_999]) {
        assert.deepEqual(generateWorld(split, seed), generateWorld(split, seed));
        assert.deepEqual(playExpert(split, seed).transcript, playExpert(split, seed).transcript);
      }
    }
  });

  test('worlds are a pure function of (split, seed): a recorded world matches on every runtime', () => {
    // Recorded once; a change here means every seed now names a different world (bump the version).
    assert.equal(env.version, '2.0.0');
    const s = env.create({ split: 'train', seed: 3 });
    assert.equal(
      s.reset().observation,
      '-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a armchair 1, ' +
        'a coffeetable 1, a drawer 4, a drawer 3, a drawer 2, a drawer 1, a garbagecan 1, a shelf 3, a shelf 2, a shelf 1, ' +
        'a sidetable 1, a sofa 1, and a tvstand 1.\n\nYour task is to: find two newspaper and put them in tvstand.',
    );
    // Both newspapers start at their usual place, the armchair.
    assert.deepEqual(expertPlan(s.state()), [
      'go to armchair 1', 'take newspaper 1 from armchair 1', 'go to tvstand 1', 'move newspaper 1 to tvstand 1',
      'go to armchair 1', 'take newspaper 2 from armchair 1', 'go to tvstand 1', 'move newspaper 2 to tvstand 1',
    ]);
  });

  test('splits draw from disjoint seeds, and valid_unseen from layouts and combinations train never uses', () => {
    let same = 0;
    for (let seed = 0; seed < 20; seed++) {
      if (JSON.stringify(generateWorld('train', seed).receptacles) === JSON.stringify(generateWorld('valid_seen', seed).receptacles)) same++;
    }
    assert.ok(same < 10, `${same}/20 seeds give the same room on train and valid_seen`);
    const key = (w: ReturnType<typeof generateWorld>) => `${w.task.type}|${w.task.object}|${w.task.target}`;
    const trainLayouts = new Set<string>();
    const trainCombos = new Set<string>();
    for (let seed = 0; seed < 300; seed++) {
      const w = generateWorld('train', seed);
      trainLayouts.add(w.layout);
      trainCombos.add(key(w));
    }
    const unseenLayouts = new Set(LAYOUTS.filter((l) => l.unseen).map((l) => l.id));
    for (let seed = 0; seed < 150; seed++) {
      const w = generateWorld('valid_unseen', seed);
      assert.ok(unseenLayouts.has(w.layout) && !trainLayouts.has(w.layout), `valid_unseen/${seed} uses layout ${w.layout}`);
      assert.ok(!trainCombos.has(key(w)), `valid_unseen/${seed} uses train combination ${key(w)}`);
      assert.ok(COMBOS.some((c) => c.unseen && key(w) === `${c.taskType}|${c.object}|${c.target}`));
    }
    for (const t of TASK_TYPES) assert.ok(splitCombos('valid_unseen', t).length > 0, `no valid_unseen combination for ${t}`);
  });

  test('bad seeds, splits and explicit tasks are refused with EnvInputError', () => {
    assert.throws(() => env.create({ split: 'train', seed: -1 }), EnvInputError);
    assert.throws(() => env.create({ split: 'train', seed: 1.5 }), EnvInputError);
    assert.throws(() => env.create({ split: 'train', seed: 1e9 }), /seed must be an integer in \[0, 1000000000\)/);
    assert.throws(() => env.create({ split: 'test' as Split, seed: 1 }), /unknown split "test"/);
    assert.throws(() => env.create({ split: 'train', seed: 1, task: { task_type: 'juggle' } }), /unknown task.task_type "juggle"/);
    assert.throws(() => env.create({ split: 'train', seed: 1, task: { object: 'unicorn' } }), /unknown task.object "unicorn"/);
    assert.throws(() => env.create({ split: 'train', seed: 1, task: { colour: 'red' } }), /unknown field "task.colour"/);
    assert.throws(() => env.create({ split: 'train', seed: 1, task: 'apple' }), EnvInputError);
    assert.throws(() => env.create({ split: 'train', seed: 1, task: { task_type: 'pick_heat_then_place', object: 'book' } }), /no train room can host/);
  });

  test('an explicit task fixes the task and the seed draws the rest', () => {
    const s = env.create({ split: 'train', seed: 5, task: { task_type: 'pick_cool_then_place', object: 'apple', target: 'countertop' } });
    const w = s.state();
    assert.deepEqual([w.task.type, w.task.object, w.task.target], ['pick_cool_then_place', 'apple', 'countertop']);
    assert.ok(['put a cool apple in countertop.', 'cool some apple and put it in countertop.'].includes(s.task));
    assert.ok(playExpertOn(s));
  });
});

function playExpertOn(s: HouseholdSession): boolean {
  let info = s.reset().info as HouseholdInfo;
  while (info.expert_action !== null) {
    const r = s.step(info.expert_action);
    info = r.info as HouseholdInfo;
    if (r.done) return r.info.won;
  }
  return false;
}

describe('household commands', () => {
  test('open, close, take, inventory, examine, heat and move change the state with ALFWorld feedback', () => {
    const s = env.create({ split: 'train', seed: 11, task: { task_type: 'pick_heat_then_place', object: 'egg', target: 'countertop' } });
    s.reset();
    const cabinet = s.state().receptacles.find((r) => r.type === 'cabinet')!.name;
    assert.equal(s.step(`go to ${cabinet}`).observation, `You arrive at ${cabinet}. The ${cabinet} is closed.`);
    assert.ok(!admissibleCommands(s.state()).some((c) => c.startsWith('take ')), 'contents of a closed cabinet are takeable');
    const inside = s.state().items.filter((i) => i.in === cabinet).map((i) => i.name);
    const opened = s.step(`open ${cabinet}`);
    assert.equal(opened.observation, `You open the ${cabinet}. The ${cabinet} is open. In it, you see ${listing(inside)}.`);
    assert.ok(opened.admissible_actions.includes(`close ${cabinet}`));
    for (const o of inside) assert.ok(opened.admissible_actions.includes(`take ${o} from ${cabinet}`));
    assert.equal(s.step(`close ${cabinet}`).observation, `You close the ${cabinet}.`);
    assert.equal(s.state().receptacles.find((r) => r.name === cabinet)!.open, false);
    assert.equal(s.step('look').observation, `You are facing the ${cabinet}. Next to it, you see nothing.`);

    assert.equal(s.step('inventory').observation, 'You are not carrying anything.');
    const egg = takeTaskObject(s);
    assert.equal(s.state().holding, egg);
    assert.equal(s.state().items.find((i) => i.name === egg)!.in, null);
    assert.equal(s.step('inventory').observation, `You are carrying: a ${egg}.`);
    assert.equal(s.step(`examine ${egg}`).observation, `There's nothing special about ${egg}.`);
    assert.ok(!s.step('look').admissible_actions.some((c) => c.startsWith('take ')), 'can take with full hands');

    reach(s, 'microwave 1');
    assert.ok(admissibleCommands(s.state()).includes(`heat ${egg} with microwave 1`));
    assert.equal(s.step(`heat ${egg} with microwave 1`).observation, `You heat the ${egg} using the microwave 1.`);
    assert.equal(s.step(`examine ${egg}`).observation, `This is a hot ${egg}.`);
    const counter = s.state().receptacles.find((r) => r.type === 'countertop')!.name;
    s.step(`go to ${counter}`);
    const put = s.step(`move ${egg} to ${counter}`);
    assert.equal(put.observation, `You move the ${egg} to the ${counter}.`);
    assert.deepEqual([put.reward, put.done, put.info.won], [10, true, true]);
    assert.throws(() => s.step('look'), EpisodeDoneError);

    const again = s.reset();
    assert.equal(again.info.won, false);
    assert.equal(s.state().holding, null);
    assert.equal(s.stepCount, 0);
  });

  test('cool, clean and the desk lamp', () => {
    const cool = env.create({ split: 'train', seed: 2, task: { task_type: 'pick_cool_then_place', object: 'tomato' } });
    cool.reset();
    const tomato = takeTaskObject(cool);
    cool.step('go to fridge 1');
    assert.equal(cool.step(`cool ${tomato} with fridge 1`).observation, `You cool the ${tomato} using the fridge 1.`);
    assert.equal(cool.step(`examine ${tomato}`).observation, `This is a cold ${tomato}.`);

    const clean = env.create({ split: 'train', seed: 3, task: { task_type: 'pick_clean_then_place', object: 'soapbar' } });
    clean.reset();
    const soap = takeTaskObject(clean);
    clean.step('go to sinkbasin 1');
    assert.equal(clean.step(`clean ${soap} with sinkbasin 1`).observation, `You clean the ${soap} using the sinkbasin 1.`);
    assert.equal(clean.step(`examine ${soap}`).observation, `This is a clean ${soap}.`);

    const look = env.create({ split: 'train', seed: 4, task: { task_type: 'look_at_obj_in_light', object: 'alarmclock' } });
    look.reset();
    const lamp = look.state().items.find((i) => i.type === 'desklamp')!;
    assert.equal(lamp.pickupable, false);
    takeTaskObject(look);
    look.step(`go to ${lamp.in}`);
    assert.ok(!look.state().items.find((i) => i.name === lamp.name)!.on);
    const lit = look.step(`use ${lamp.name}`);
    assert.equal(lit.observation, `You turn on the ${lamp.name}.`);
    assert.deepEqual([lit.reward, lit.done, lit.info.won], [10, true, true]);
  });

  test('anything inadmissible answers "Nothing happens." and changes nothing', () => {
    const s = env.create({ split: 'train', seed: 21 });
    s.reset();
    const before = s.state();
    const here = before.receptacles[0].name;
    for (const a of ['', 'fly to the moon', 'take apple 1 from countertop 9', 'open countertop 1', `close ${here}`, 'move apple 1 to fridge 1', 'use desklamp 7']) {
      const r = s.step(a);
      assert.equal(r.observation, NOTHING_HAPPENS, `"${a}"`);
      assert.deepEqual([r.reward, r.done, r.info.won], [0, false, false]);
    }
    assert.deepEqual(s.state(), before);
    s.step(`go to ${here}`);
    assert.equal(s.step(`go to ${here}`).observation, NOTHING_HAPPENS);
    assert.equal(s.step(`  GO   TO ${before.receptacles[1].name} `).observation.startsWith(`You arrive at ${before.receptacles[1].name}.`), true);
  });

  test('admissible commands are sorted, never list the current spot, and are exactly what runs', () => {
    const s = env.create({ split: 'valid_seen', seed: 8 });
    const r = s.reset();
    assert.deepEqual(r.admissible_actions, [...r.admissible_actions].sort());
    assert.deepEqual(r.admissible_actions, r.info.admissible_commands);
    const target = s.state().receptacles[2].name;
    const there = s.step(`go to ${target}`);
    assert.ok(!there.admissible_actions.includes(`go to ${target}`));
    assert.ok(there.admissible_actions.includes(`examine ${target}`));
    for (const a of there.admissible_actions) {
      const copy = env.create({ split: 'valid_seen', seed: 8 });
      copy.reset();
      copy.step(`go to ${target}`);
      assert.notEqual(copy.step(a).observation, NOTHING_HAPPENS, a);
    }
  });

  test('the episode ends after 50 steps without a win', () => {
    const s = env.create({ split: 'train', seed: 9 });
    s.reset();
    for (let i = 1; i <= 50; i++) {
      const r = s.step('look');
      assert.deepEqual([r.reward, r.done, r.info.won], [0, i === 50, false]);
    }
    assert.throws(() => s.step('look'), EpisodeDoneError);
    assert.ok(!isWon(s.state()));
  });

  test('lists read like ALFWorld: by type, highest number first, with a serial comma', () => {
    assert.equal(listing([]), 'nothing');
    assert.equal(listing(['apple 1']), 'a apple 1');
    assert.equal(listing(['apple 1', 'bread 1']), 'a apple 1, and a bread 1');
    assert.equal(listing(['spoon 1', 'cabinet 10', 'spoon 2', 'cabinet 9']), 'a cabinet 10, a cabinet 9, a spoon 2, and a spoon 1');
  });
});

describe('household dialects', () => {
  test('the put grammar of ALFWorld 0.3.3: "put X in/on Y" is admitted and answered in its words, "move" is not', () => {
    const put = new HouseholdEnvironment({ grammar: 'put' });
    for (const seed of [2, 3, 4]) {
      const s = put.create({ split: 'train', seed });
      let r: StepResult | ReturnType<typeof s.reset> = s.reset();
      let info = r.info as HouseholdInfo;
      let placed = false;
      while (info.expert_action !== null) {
        const action = info.expert_action;
        assert.ok(!action.startsWith('move '), action);
        assert.ok(r.admissible_actions.includes(action), `${action} not admitted`);
        if (action.startsWith('put ')) {
          assert.match(action, /^put .+ in\/on .+$/);
          const moved = action.replace(/^put (.+) in\/on (.+)$/, 'move $1 to $2');
          assert.equal(put.create({ split: 'train', seed }).step(moved).observation, NOTHING_HAPPENS);
          r = s.step(action);
          assert.match(r.observation, /^You put the .+ in\/on the .+\.$/);
          placed = true;
        } else {
          r = s.step(action);
        }
        info = r.info as HouseholdInfo;
        if ('done' in r && r.done) break;
      }
      assert.ok(placed && info.won, `train/${seed}`);
    }
  });

  test('with fullCommands, help and examine on the objects in view are admitted as in ALFWorld', () => {
    const full = new HouseholdEnvironment({ fullCommands: true }).create({ split: 'train', seed: 3 });
    const plain = env.create({ split: 'train', seed: 3 });
    assert.ok(full.reset().admissible_actions.includes('help'));
    assert.ok(!plain.reset().admissible_actions.includes('help'));
    assert.match(full.step('help').observation, /^Available commands:\n {2}look: /);
    assert.equal(plain.step('help').observation, NOTHING_HAPPENS);
    const w = full.state();
    const spot = w.items.find((o) => o.in !== null)!.in!;
    const there = full.step(`go to ${spot}`);
    const item = w.items.find((o) => o.in === spot)!;
    if (there.admissible_actions.includes(`take ${item.name} from ${spot}`)) {
      assert.ok(there.admissible_actions.includes(`examine ${item.name}`));
      assert.equal(full.step(`examine ${item.name}`).observation, `There's nothing special about ${item.name}.`);
    }
  });
});

describe('household agent turn format', () => {
  const pick = (p: ParsedAction) => [p.action, p.valid, p.reason];
  test('the reference projection: the first <action> pair lower-cased, sent even when invalid; untagged turns send their last 30 characters', () => {
    assert.deepEqual(parseAction('<think>the cabinet</think> <action> Go To Cabinet 1 </action>'), {
      action: 'go to cabinet 1', extracted: 'go to cabinet 1', valid: true, reason: null,
    });
    assert.equal(parseAction('<think>x</think><action>open drawer 1</action><action>look</action>').action, 'open drawer 1');
    assert.equal(parseAction('<think>x</think><ACTION>Look</ACTION>').action, 'look', 'tags are found in the lower-cased text');
    // The first </action> comes before the first <action>: Python's slice is empty, and the turn is valid.
    assert.deepEqual(pick(parseAction('</action><think>x</think><action>look</action>')), ['', true, null]);
    const untagged = '<think>hmm, the cabinet</think> I will go to cabinet 1';
    assert.deepEqual(pick(parseAction(untagged)), [untagged.toLowerCase().slice(-30), false, 'missing_action_tags']);
    assert.equal(parseAction(untagged).action, 'net</think> i will go to cabinet 1'.slice(-30));
    assert.deepEqual(pick(parseAction('<think>x</think><action>look')), ['<think>x</think><action>look', false, 'missing_action_tags']);
    assert.deepEqual(pick(parseAction('<action>look</action>')), ['look', false, 'missing_think_tags']);
    assert.deepEqual(pick(parseAction('<think>x<action>look</action>')), ['look', false, 'missing_think_tags']);
    assert.deepEqual(pick(parseAction('<think>我要去柜子</think><action>look</action>')), ['look', false, 'cjk']);
    // Only Han ideographs (U+4E00-U+9FFF) count, as in the reference's regular expression.
    for (const other of ['キャビネット', '캐비닛']) assert.deepEqual(pick(parseAction(`<think>${other}</think><action>look</action>`)), ['look', true, null], other);
  });

  test('the prompt shows the task, the step count, the last K turns, the observation and the admissible actions', () => {
    const history = [1, 2, 3].map((i) => ({ observation: `obs ${i}`, action: `act ${i}` }));
    const p = renderHouseholdPrompt({
      task: 'put some spraybottle on toilet.', history, observation: 'You arrive at toilet 1.', admissibleActions: ['go to cabinet 1', 'look'],
    });
    const lines = p.split('\n');
    assert.match(lines[0], /^You are an expert agent operating in a household environment/);
    assert.equal(lines[1], 'Your task is to: put some spraybottle on toilet.');
    assert.match(p, /already taken 3 step\(s\)/);
    assert.ok(!p.includes("'obs 1'") && !p.includes("'act 1'"));
    assert.ok(p.includes("[Observation 2: 'obs 2', Action 2: 'act 2']\n[Observation 3: 'obs 3', Action 3: 'act 3']"));
    assert.match(p, /You are now at step 4\. Current observation: You arrive at toilet 1\./);
    assert.ok(p.includes("['go to cabinet 1',\n 'look']"));
    assert.match(p, /<think> <\/think>.*<action> <\/action>/);

    const fresh = renderHouseholdPrompt({ task: 't', history: [], observation: 'o', admissibleActions: ['look'], historyLength: 2 });
    assert.match(fresh, /not taken any steps yet/);
    assert.match(fresh, /now at step 1\./);
    const k1 = renderHouseholdPrompt({ task: 't', history, observation: 'o', admissibleActions: [], historyLength: 1 });
    assert.ok(k1.includes('Observation 3') && !k1.includes('Observation 2'));
  });

  test('the teacher prompt starts with the skill block of the task type', () => {
    const skills = householdSkills('pick_heat_then_place');
    assert.ok(skills.startsWith(`${householdSkillCard('general')}\n\n${householdSkillCard('pick_heat_then_place')}\n\n`));
    assert.ok(skills.endsWith(usualPlacesCard('pick_heat_then_place')));
    const p = renderHouseholdPrompt({ task: 't', history: [], observation: 'o', admissibleActions: ['look'], skills });
    assert.ok(p.startsWith(`${SKILL_HEADER}\n${skills}\n\nYou are an expert agent`));
    for (const t of TASK_TYPES) assert.match(householdSkillCard(t), new RegExp(`\\(${t}\\)`));
    assert.throws(() => householdSkills('juggling'), /no skill card for task type "juggling"/);
  });

  test('cards as the reference routes them: the teacher\'s by task type, the policy\'s (Skill-GRPO) by keywords over the prompt', () => {
    const cards = (...types: TaskType[]) => [householdSkillCard('general'), ...types.flatMap((t) => [householdSkillCard(t), usualPlacesCard(t)])].join('\n\n');
    const prompt = renderHouseholdPrompt({ task: 'heat some egg and put it in garbagecan.', history: [], observation: 'o', admissibleActions: ['look'] });
    assert.equal(householdAgent.skills('pick_heat_then_place', prompt, 'teacher'), householdSkills('pick_heat_then_place'));
    // "heat" and "put" both occur: two cards, in the table's order.
    assert.equal(householdAgent.skills('pick_heat_then_place', prompt, 'policy'), cards('pick_heat_then_place', 'pick_and_place'));
    assert.equal(householdKeywordSkills('put two keychain in safe.'), cards('pick_two_obj_and_place', 'pick_and_place'));
    assert.equal(householdKeywordSkills('examine the alarmclock with the desklamp.'), cards(), 'no keyword: the general card alone');
    assert.equal(householdKeywordSkills('look at bowl under the desklamp.'), cards('look_at_obj_in_light'));
    assert.equal(householdAgent.skills('alfworld', prompt, 'teacher'), householdSkillCard('general'), 'an unknown type gets the general card');
  });
});
