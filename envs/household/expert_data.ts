// Household SFT data: an expert played over many seeds, each turn written as the agent
// loop will later show it to the model (the real prompt renderer with K = 2 history
// and the household answer format) with a short templated thought saying why the
// expert's action follows from the task and the state.
//
// The expert is the searching one (envs/household/searcher.ts), which knows only what
// it has seen: a model cloned from the environment's all-seeing expert learns to take
// objects that are not there, since after each of that expert's "go to" the object
// was there. With `detour` > 0 some turns are replaced by a random "go to" that is not
// a training sample: it enters the history as the action taken, and the expert's next
// turns, which are samples, recover from wherever it led.

import type { ReasoningFormat } from '../../src/tokenizer/thinking.ts';
import { SPLITS } from '../../src/envs/types.ts';
import type { ExpertDataOptions, ExpertTurn } from '../../src/envs/plugin.ts';
import { Prng } from '../../src/util/random.ts';
import { householdAgent } from './agent.ts';
import { transformOf } from './catalog.ts';
import { usualPlaces } from './conventions.ts';
import { HouseholdEnvironment, type HouseholdInfo } from './env.ts';
import { hasRequiredState } from './goal.ts';
import { renderHouseholdPrompt, type HouseholdTurn } from './prompt.ts';
import { SearchingExpert } from './searcher.ts';
import { householdSkills } from './skills.ts';
import { held, isReachable, itemsIn, receptacle, type World } from './world.ts';

/** Chance of a detour per expert turn in the bundled model's data and in generated SFT data. */
export const DEFAULT_DETOUR = 0.1;

/**
 * A one-sentence reason for the expert's `action` in state `w` (before the action).
 * An expert that `knowsUsualPlaces` says so when it heads for one.
 */
export function expertThought(w: World, action: string, knowsUsualPlaces = false): string {
  const { type, object, target } = w.task;
  const hand = held(w);
  const words = action.split(' ');
  const verb = words[0];
  if (verb === 'go' && words[1] === 'to') {
    const place = words.slice(2).join(' ');
    if (knowsUsualPlaces) {
      const placeType = receptacle(w, place)?.type;
      // What this walk is looking for: the task object, or the lamp once the object is in hand.
      const sought = !hand ? object : type === 'look_at_obj_in_light' && hand.type === object ? target : null;
      if (sought !== null && placeType !== undefined && usualPlaces(sought).includes(placeType)) {
        return `The ${sought} is usually kept at the ${placeType}, so I will go to the ${place}.`;
      }
    }
    if (!hand) {
      const here = w.at === null ? undefined : receptacle(w, w.at);
      const lookedHere = here !== undefined && isReachable(here) && !itemsIn(w, here.name).some((o) => o.type === object);
      return lookedHere ? `There is no ${object} here, so I will go to the ${place}.` : `I need to find a ${object}, so I will go to the ${place}.`;
    }
    if (hand.type !== object) return `I need to put down the ${hand.name} first, so I will go to the ${place}.`;
    const transform = transformOf(type);
    if (transform && !hasRequiredState(w, hand)) return `I need to ${transform} the ${hand.name}, so I will go to the ${place}.`;
    if (type === 'look_at_obj_in_light') return `I have the ${hand.name} and need the ${target}, so I will go to the ${place}.`;
    return `I have the ${hand.name} and it goes in the ${target}, so I will go to the ${place}.`;
  }
  if (verb === 'open') return `The ${words.slice(1).join(' ')} is closed, so I will open it.`;
  const at = action.match(/^take (.+) from (.+)$/);
  if (at) return `I see the ${at[1]} here, so I will take it.`;
  const moved = action.match(/^move (.+) to (.+)$/);
  if (moved) return hand?.type === object ? `I will put the ${moved[1]} in the ${moved[2]}.` : `I will put down the ${moved[1]} here.`;
  const tool = action.match(/^(heat|cool|clean) (.+) with (.+)$/);
  if (tool) return `I will ${tool[1]} the ${tool[2]} with the ${tool[3]}.`;
  if (verb === 'use') return `I will turn on the ${words.slice(1).join(' ')} to look at the ${object} under it.`;
  return `I will ${action}.`;
}

/** The expert's answer in the household format the agent loop parses. */
export function expertResponse(w: World, action: string, knowsUsualPlaces = false, reasoning: ReasoningFormat = 'tags'): string {
  return householdAgent.formatResponse(expertThought(w, action, knowsUsualPlaces), action, reasoning);
}

/** One SFT sample per expert turn of every seed's episode; the episodes are won (the expert always solves them). */
export function* householdExpertSamples(opts: ExpertDataOptions): Generator<ExpertTurn> {
  const split = opts.split ?? 'train';
  const detour = opts.detour ?? 0;
  const maxDetours = opts.maxDetours ?? 3;
  const skillsShare = opts.skillsShare ?? 0;
  if (!(detour >= 0 && detour < 1)) throw new RangeError(`householdExpertSamples: detour must lie in [0, 1), got ${detour}`);
  if (!(skillsShare >= 0 && skillsShare <= 1)) throw new RangeError(`householdExpertSamples: skillsShare must lie in [0, 1], got ${skillsShare}`);
  const env = new HouseholdEnvironment();
  const rng = new Prng(opts.rngSeed ?? 0);
  for (const seed of opts.seeds) {
    const session = env.create({ split, seed });
    const first = session.reset();
    let observation = first.observation;
    let admissible = first.admissible_actions;
    let info = first.info as HouseholdInfo;
    const history: HouseholdTurn[] = [];
    let detours = 0;
    const skilled = skillsShare > 0 && rng.next() < skillsShare;
    const skills = skilled ? householdSkills(info.task_type) : undefined;
    const render = () => renderHouseholdPrompt({ task: session.task, history, observation, admissibleActions: admissible, skills, reasoning: opts.reasoning });
    const expert = new SearchingExpert({ knowsUsualPlaces: skilled });
    for (let next = expert.next(session.state()); next !== null && session.stepCount < env.maxSteps; next = expert.next(session.state())) {
      let action = next;
      const moves = admissible.filter((a) => a.startsWith('go to ') && a !== action);
      if (detours < maxDetours && moves.length > 0 && rng.next() < detour) {
        action = rng.pick(moves);
        detours++;
      } else {
        const response = expertResponse(session.state(), action, skilled, opts.reasoning);
        yield { prompt: render(), response, split, seed, turn: history.length, taskType: info.task_type, withSkills: skilled };
      }
      const step = session.step(action);
      history.push({ observation, action });
      observation = step.observation;
      admissible = step.admissible_actions;
      info = step.info as HouseholdInfo;
      if (step.done) break;
    }
  }
}

/**
 * Text for the tokenizer's vocabulary: prompts (half of the episodes with the skills
 * block) and responses of `seedsPerSplit` episodes of every split, with detours so
 * that wrong turns' observations are covered too.
 */
export function* householdCorpus(seedsPerSplit: number): Generator<string> {
  for (const split of SPLITS) {
    const seeds = Array.from({ length: seedsPerSplit }, (_, i) => i);
    for (const s of householdExpertSamples({ split, seeds, detour: 0.2, skillsShare: 0.5 })) {
      yield s.prompt;
      yield s.response;
    }
  }
}
