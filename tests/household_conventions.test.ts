// Where things are kept: worlds follow the conventions, the skill cards state them
// exactly, and an expert that knows them finds things in about half the steps. This
// is what makes the teacher's privileged context worth distilling.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { COMBOS, LAMPS, OBJECTS, TASK_TYPES } from '../envs/household/catalog.ts';
import { allowedPlaces, searchRank, USUAL_PLACE_SHARE, USUAL_PLACES, usualPlaceAmong, usualPlaces } from '../envs/household/conventions.ts';
import { HouseholdEnvironment } from '../envs/household/env.ts';
import { generateWorld } from '../envs/household/generate.ts';
import { SearchingExpert } from '../envs/household/searcher.ts';
import { householdSkills } from '../envs/household/skills.ts';
import { receptacle } from '../envs/household/world.ts';
import type { Split } from '../src/envs/types.ts';
import { expertThought, householdExpertSamples } from '../src/trainer/expert_data.ts';

const env = new HouseholdEnvironment();

/** Steps the searching expert takes to win (split, seed), and whether it won. */
function play(split: Split, seed: number, knowsUsualPlaces: boolean): { steps: number; won: boolean; actions: string[] } {
  const s = env.create({ split, seed });
  s.reset();
  const expert = new SearchingExpert({ knowsUsualPlaces });
  const actions: string[] = [];
  for (let a = expert.next(s.state()); a !== null; a = expert.next(s.state())) {
    actions.push(a);
    const r = s.step(a);
    if (r.done) return { steps: actions.length, won: r.info.won as boolean, actions };
  }
  return { steps: actions.length, won: true, actions };
}

describe('household conventions', () => {
  test('every object and lamp kind has usual places, each one a place that kind can be', () => {
    const kinds = [...Object.keys(OBJECTS), ...Object.keys(LAMPS)].sort();
    assert.deepEqual(Object.keys(USUAL_PLACES).sort(), kinds);
    for (const kind of kinds) {
      assert.ok(usualPlaces(kind).length > 0, kind);
      for (const p of usualPlaces(kind)) assert.ok(allowedPlaces(kind).includes(p), `${kind}: usual place ${p} is not a place it can be`);
    }
    assert.equal(usualPlaceAmong('mug', ['desk', 'sidetable']), 'desk');
    assert.equal(usualPlaceAmong('mug', ['shelf']), null);
    assert.ok(searchRank('mug', 'coffeemachine') < searchRank('mug', 'desk'));
    assert.equal(searchRank('mug', 'shelf'), Number.MAX_SAFE_INTEGER);
    assert.throws(() => usualPlaces('unicorn'), /no usual place for "unicorn"/);
  });

  test('most copies of a kind start at its usual place when the room has one', () => {
    let eligible = 0;
    let usual = 0;
    for (let seed = 0; seed < 400; seed++) {
      const w = generateWorld('train', seed);
      const types = [...new Set(w.receptacles.map((r) => r.type))];
      for (const o of w.items) {
        if (o.in === null) continue;
        const home = usualPlaceAmong(o.type, types);
        if (home === null) continue;
        eligible++;
        if (receptacle(w, o.in)!.type === home) usual++;
      }
    }
    const share = usual / eligible;
    // The usual place gets USUAL_PLACE_SHARE of the copies plus its turn among the rest.
    assert.ok(share >= USUAL_PLACE_SHARE && share < 0.98, `${usual}/${eligible} = ${share.toFixed(3)} at the usual place`);
  });

  test("each task type's card lists where every object it can ask for is usually kept, exactly as the worlds place them", () => {
    for (const t of TASK_TYPES) {
      const card = householdSkills(t);
      const lines = new Map([...card.matchAll(/^- (\w+): (.+)$/gm)].map((m) => [m[1], m[2].split(', else ')]));
      const kinds = new Set(COMBOS.filter((c) => c.taskType === t).map((c) => c.object));
      if (t === 'look_at_obj_in_light') kinds.add('desklamp');
      assert.deepEqual([...lines.keys()].sort(), [...kinds].sort(), t);
      for (const [kind, places] of lines) assert.deepEqual(places, usualPlaces(kind), `${t}: ${kind}`);
    }
  });

  test('an expert that knows the usual places wins every task in about half the steps of one that searches in room order', () => {
    for (const split of ['train', 'valid_seen', 'valid_unseen'] as const) {
      let plain = 0;
      let knowing = 0;
      for (let seed = 0; seed < 150; seed++) {
        const a = play(split, seed, false);
        const b = play(split, seed, true);
        assert.ok(a.won && b.won, `${split}/${seed}: ${a.actions.join(' | ')} // ${b.actions.join(' | ')}`);
        plain += a.steps;
        knowing += b.steps;
      }
      assert.ok(knowing < 0.65 * plain, `${split}: ${knowing} steps knowing the usual places against ${plain}`);
    }
  });

  test('the knowing expert goes to the usual place first and says why', () => {
    let checked = 0;
    for (let seed = 0; seed < 60; seed++) {
      const w = generateWorld('valid_seen', seed);
      // A task that only moves the object never finds it where it must go.
      const moves = w.task.type === 'pick_and_place' || w.task.type === 'pick_two_obj_and_place';
      const types = w.receptacles.map((r) => r.type).filter((t) => !(moves && t === w.task.target));
      const home = usualPlaceAmong(w.task.object, types);
      if (home === null) continue;
      const first = play('valid_seen', seed, true).actions[0];
      assert.match(first, new RegExp(`^go to ${home} \\d+$`), `valid_seen/${seed}: ${w.task.object} is usually at the ${home}`);
      assert.equal(expertThought(w, first, true), `The ${w.task.object} is usually kept at the ${home}, so I will go to the ${first.slice(6)}.`);
      assert.doesNotMatch(expertThought(w, first, false), /usually/);
      checked++;
    }
    assert.ok(checked > 40, `only ${checked} tasks had a usual place in the room`);
  });

  test("SFT data: a share of the episodes carries the skills block, and only those episodes' expert follows it", () => {
    const seeds = Array.from({ length: 40 }, (_, i) => i);
    const samples = [...householdExpertSamples({ split: 'train', seeds, skillsShare: 0.5, rngSeed: 1 })];
    const skilled = new Set(samples.filter((s) => s.withSkills).map((s) => s.seed));
    assert.ok(skilled.size > 10 && skilled.size < 30, `${skilled.size} of 40 episodes with skills`);
    for (const s of samples) {
      assert.equal(s.prompt.startsWith('[Privileged Skill Information]\n'), s.withSkills === true);
      if (!s.withSkills) assert.doesNotMatch(s.response, /usually/);
    }
    assert.ok(samples.some((s) => s.withSkills && /usually kept at/.test(s.response)));
    const none = [...householdExpertSamples({ split: 'train', seeds, rngSeed: 1 })];
    assert.ok(none.every((s) => !s.withSkills));
    assert.throws(() => householdExpertSamples({ split: 'train', seeds, skillsShare: 1.5 }).next(), /skillsShare must lie in \[0, 1\]/);
  });
});

