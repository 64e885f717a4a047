import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OBJECTS, TASK_TYPES } from '../envs/household/catalog.ts';
import { admissibleCommands } from '../envs/household/commands.ts';
import { HOUSEHOLD_MAX_STEPS, HouseholdEnvironment } from '../envs/household/env.ts';
import { SearchingExpert } from '../envs/household/searcher.ts';
import { isReachable, itemsIn, receptacle, type World } from '../envs/household/world.ts';
import type { Split } from '../src/envs/types.ts';

const env = new HouseholdEnvironment();

interface Played {
  won: boolean;
  actions: string[];
  /** The state before each action. */
  states: World[];
}

function play(split: Split, seed: number, first?: (w: World) => string | null): Played {
  const s = env.create({ split, seed });
  s.reset();
  const expert = new SearchingExpert();
  const played: Played = { won: false, actions: [], states: [] };
  for (;;) {
    const w = s.state();
    const forced = played.actions.length === 0 && first ? first(w) : null;
    const next = expert.next(w);
    if (next === null) return { ...played, won: true };
    const action = forced ?? next;
    assert.ok(admissibleCommands(w).includes(action), `${split}/${seed}: "${action}" is not admissible`);
    played.states.push(w);
    played.actions.push(action);
    const r = s.step(action);
    if (r.done) return { ...played, won: r.info.won as boolean };
  }
}

describe('household searching expert', () => {
  test('wins every task of 150 seeds per split within the step limit, all task types', () => {
    for (const split of ['train', 'valid_seen', 'valid_unseen'] as const) {
      const types = new Set<string>();
      let steps = 0;
      for (let seed = 0; seed < 150; seed++) {
        const p = play(split, seed);
        assert.ok(p.won, `${split}/${seed} not won: ${p.actions.join(' | ')}`);
        assert.ok(p.actions.length <= HOUSEHOLD_MAX_STEPS);
        steps += p.actions.length;
        types.add(p.states[0].task.type);
      }
      assert.equal(types.size, TASK_TYPES.length);
      console.log(`searching expert, ${split}: ${(steps / 150).toFixed(1)} steps per episode`);
    }
  });

  test('takes only what it has seen: before the first take it looked into every earlier candidate, in the room order', () => {
    let checked = 0;
    for (let seed = 0; seed < 100; seed++) {
      const p = play('valid_seen', seed);
      const i = p.actions.findIndex((a) => a.startsWith('take '));
      if (i < 0) continue;
      const w0 = p.states[0];
      const object = w0.task.object;
      const from = p.actions[i].match(/^take .+ from (.+)$/)![1];
      if (w0.items.find((o) => o.name === p.actions[i].match(/^take (.+) from/)![1])!.type !== object) continue;
      // Receptacles where the object can be, in the room's order, up to the one it came from.
      const simple = w0.task.type === 'pick_and_place' || w0.task.type === 'pick_two_obj_and_place';
      const places = OBJECTS[object].places.filter((t) => !(simple && t === w0.task.target));
      const candidates = w0.receptacles.filter((r) => places.includes(r.type)).map((r) => r.name);
      const visited = p.actions.slice(0, i).filter((a) => a.startsWith('go to ')).map((a) => a.slice(6));
      assert.deepEqual(visited, candidates.slice(0, candidates.indexOf(from) + 1), `valid_seen/${seed}: ${p.actions.join(' | ')}`);
      checked++;
    }
    assert.ok(checked > 30, `only ${checked} episodes checked`);
  });

  test('opens a closed candidate it stands at, and goes on after a detour', () => {
    let opened = 0;
    for (let seed = 0; seed < 60; seed++) {
      const p = play('train', seed);
      p.actions.forEach((a, k) => {
        if (!a.startsWith('open ')) return;
        const r = receptacle(p.states[k], a.slice(5))!;
        assert.equal(p.states[k].at, r.name);
        assert.ok(!isReachable(r));
        opened++;
      });
    }
    assert.ok(opened > 10, `only ${opened} opens`);
    // A detour first: a "go to" somewhere it would not have gone; it still wins.
    for (let seed = 0; seed < 40; seed++) {
      const p = play('train', seed, (w) => `go to ${w.receptacles.at(-1)!.name}`);
      assert.ok(p.won, `train/${seed} after a detour: ${p.actions.join(' | ')}`);
    }
  });

  test('a second object it has already seen is fetched from there without searching again', () => {
    let cases = 0;
    for (let seed = 0; seed < 400 && cases < 5; seed++) {
      const p = play('train', seed);
      if (p.states[0].task.type !== 'pick_two_obj_and_place') continue;
      const first = p.actions.findIndex((a) => a.startsWith('move '));
      const w = p.states[first + 1];
      const goal = p.actions[first].match(/ to (.+)$/)![1];
      // Receptacles visited (and so seen, when open) before the first delivery that still hold the object.
      const seenBefore = new Set(p.actions.slice(0, first).flatMap((a) => (a.startsWith('go to ') ? [a.slice(6)] : a.startsWith('open ') ? [a.slice(5)] : [])));
      const known = [...seenBefore].filter(
        (r) => r !== goal && isReachable(receptacle(w, r)!) && itemsIn(w, r).some((o) => o.type === w.task.object),
      );
      if (known.length === 0) continue;
      assert.ok(known.includes(p.actions[first + 1].slice(6)), `train/${seed}: ${p.actions.join(' | ')}`);
      cases++;
    }
    assert.ok(cases > 0, 'no pick-two episode saw its second object during the first search');
  });
});
