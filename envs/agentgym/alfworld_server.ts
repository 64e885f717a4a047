// A stand-in for AgentGym's ALFWorld server (agentenv-alfworld: server.py,
// env_wrapper.py, model.py, utils.py), playing our household worlds in ALFWorld 0.3.3's
// words. What a client sees is what the real server sends:
// - routes: GET / ("This is environment AlfWorld."), POST /create -> {"id": n} (ids
//   0, 1, 2, ... in creation order), POST /reset {id, game, world_type} ->
//   {id, observation, available_actions, task_type}, POST /step {id, action} ->
//   {observation, reward, available_actions, done}, GET /observation?id=,
//   GET /available_actions?id=, GET /detail?id=; no route releases an environment.
// - the index space: the server's game list, 2,420 training games then 200 test games
//   by default, indexed as a Python list (-1 is the last game; past the end,
//   "list index out of range"). Game i < 2,420 is our train world i, the test games
//   our valid_unseen worlds (held-out rooms).
// - errors: HTTP 200 with {"error": ...} for whatever fails inside the environment
//   (an unknown id, a finished episode, a bad world_type, a game past the list);
//   422 for a malformed body (fastapi.ts).
// - text: the first observation without TextWorld's welcome banner (the paragraphs
//   after it joined by one newline), "put X in/on Y", reward 1.0 on the winning step,
//   done at a win or the 50th step, and ALFWorld 0.3.3's "You arrive at loc N. "
//   before a receptacle's description, stripped as the wrapper's process_ob does.
//   The task type is the game file's task and trial folders.

import { HouseholdEnvironment, type HouseholdSession } from '../household/env.ts';
import type { TaskType } from '../household/catalog.ts';
import { pythonIndex, serveFastApi, type FastApiHandle } from './fastapi.ts';

export const ALFWORLD_TRAIN_GAMES = 2420;
export const ALFWORLD_TEST_GAMES = 200;

/** ALFWorld's name for each task type, as its game folders carry it. */
const ALFWORLD_NAMES: Record<TaskType, string> = {
  pick_and_place: 'pick_and_place_simple',
  pick_two_obj_and_place: 'pick_two_obj_and_place',
  look_at_obj_in_light: 'look_at_obj_in_light',
  pick_heat_then_place: 'pick_heat_then_place_in_recep',
  pick_cool_then_place: 'pick_cool_then_place_in_recep',
  pick_clean_then_place: 'pick_clean_then_place_in_recep',
};

const WORLD_TYPES = ['Text', 'Embody', 'Hybrid'];

/** AgentGym's utils.process_ob: drops ALFWorld 0.3.3's "You arrive at loc N. " from an observation. */
export function processOb(ob: string): string {
  return ob.startsWith('You arrive at loc ') ? ob.slice(ob.indexOf('. ') + 2) : ob;
}

/** Our feedback in ALFWorld 0.3.3's words: arriving names the location's number, not the receptacle. */
function alfworld033(observation: string, session: HouseholdSession): string {
  const m = /^You arrive at (.+?)\. /.exec(observation);
  if (m === null) return observation;
  const loc = session.state().receptacles.findIndex((r) => r.name === m[1]) + 1;
  return `You arrive at loc ${loc}. ${observation.slice(m[0].length)}`;
}

interface Game {
  split: 'train' | 'valid_unseen';
  seed: number;
}

interface Entry {
  session?: HouseholdSession;
  info: Record<string, unknown> & { done: boolean; deleted: boolean };
}

export interface AlfworldServerOptions {
  host?: string;
  port?: number;
  /** Games in the server's list (its mappings files): training games first, then test games. */
  trainGames?: number;
  testGames?: number;
}

export interface AlfworldServerHandle extends FastApiHandle {
  /** Environments the server holds (AgentGym's never releases one). */
  environments(): number;
}

export async function serveAlfworld(options: AlfworldServerOptions = {}): Promise<AlfworldServerHandle> {
  const trainGames = options.trainGames ?? ALFWORLD_TRAIN_GAMES;
  const games = trainGames + (options.testGames ?? ALFWORLD_TEST_GAMES);
  const household = new HouseholdEnvironment({ grammar: 'put', fullCommands: true });
  const envs = new Map<number, Entry>();
  let nextId = 0;
  const game = (i: number): Game => (i < trainGames ? { split: 'train', seed: i } : { split: 'valid_unseen', seed: i - trainGames });

  /** env_wrapper._check_id: an id it never made, or a finished episode (except for a reset). */
  const check = (id: number, isReset = false): Entry => {
    const e = envs.get(id);
    if (e === undefined) throw new Error(`The id ${id} is not valid.`);
    if (e.info.deleted) throw new Error(`The task with environment ${id} has been deleted.`);
    if (!isReset && e.info.done) throw new Error(`The task with environment ${id} has finished.`);
    return e;
  };
  /** The wrapper catches every exception of a call and answers {"error": str(e)}. */
  const guarded = (fn: () => unknown): unknown => {
    try {
      return fn();
    } catch (e) {
      return { error: (e as Error).message };
    }
  };

  const server = await serveFastApi([
    { method: 'GET', path: '/', handle: () => 'This is environment AlfWorld.' },
    {
      method: 'POST', path: '/create',
      handle: () => {
        const id = nextId++;
        envs.set(id, { info: { done: false, reward: 0, deleted: false } });
        return { id };
      },
    },
    {
      method: 'POST', path: '/reset', body: { id: 'int', game: 'int', world_type: 'str' },
      handle: ({ id, game: index, world_type }) => {
        if (!WORLD_TYPES.includes(world_type as string)) return { error: 'world_type must be one of "Text", "Embody" and "Hybrid"' };
        return guarded(() => {
          const e = check(id as number, true);
          const i = pythonIndex(index as number, games);
          if (i === null) throw new Error('list index out of range');
          const { split, seed } = game(i);
          const session = household.create({ split, seed });
          const first = session.reset();
          const observation = first.observation.split('\n\n').slice(1).join('\n');
          const task = session.state().task;
          e.session = session;
          e.info = { world_type, game: index, observation, available_actions: first.admissible_actions, done: false, reward: 0, deleted: false };
          const object = task.object[0].toUpperCase() + task.object.slice(1);
          const target = task.target[0].toUpperCase() + task.target.slice(1);
          const taskType = `${ALFWORLD_NAMES[task.type]}-${object}-None-${target}-${i}/trial_T20190909_${String(i).padStart(6, '0')}_000000`;
          return { id, observation, available_actions: first.admissible_actions, task_type: taskType };
        });
      },
    },
    {
      method: 'POST', path: '/step', body: { id: 'int', action: 'str' },
      handle: ({ id, action }) =>
        guarded(() => {
          const e = check(id as number);
          // A step before any reset: the wrapper's env_init lookup raises KeyError(id).
          if (e.session === undefined) throw new Error(String(id));
          const r = e.session.step(action as string);
          const observation = processOb(alfworld033(r.observation, e.session));
          const payload = { observation, reward: r.info.won ? 1 : 0, available_actions: r.admissible_actions, done: r.done };
          Object.assign(e.info, payload);
          return payload;
        }),
    },
    { method: 'GET', path: '/observation', query: { id: 'int' }, handle: ({ id }) => guarded(() => check(id as number).info.observation) },
    { method: 'GET', path: '/available_actions', query: { id: 'int' }, handle: ({ id }) => guarded(() => check(id as number).info.available_actions) },
    { method: 'GET', path: '/detail', query: { id: 'int' }, handle: ({ id }) => guarded(() => check(id as number).info) },
  ], options);
  return { ...server, environments: () => envs.size };
}
