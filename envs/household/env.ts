// The household environment (ALFWorld text format) behind the shared Environment contract.

import type { CreateOptions, EnvInfo, EnvSession, Environment, ResetResult, StepResult } from '../../src/envs/types.ts';
import { EpisodeDoneError } from '../errors.ts';
import { admissibleCommands, execute } from './commands.ts';
import { nextExpertAction } from './expert.ts';
import { generateWorld } from './generate.ts';
import { isWon } from './goal.ts';
import { introText } from './text.ts';
import { cloneWorld, type World } from './world.ts';

export const HOUSEHOLD_MAX_STEPS = 50;
export const HOUSEHOLD_WIN_REWARD = 10;

export interface HouseholdInfo extends EnvInfo {
  admissible_commands: string[];
  /** The expert's next command from the current state; null once the task is done. */
  expert_action: string | null;
}

export class HouseholdSession implements EnvSession {
  readonly task: string;
  private world: World;
  private steps = 0;
  private done = false;

  constructor(private readonly initial: World) {
    this.task = initial.task.sentence;
    this.world = cloneWorld(initial);
  }

  /** A copy of the current state (for tests, transcripts and tools; changing it changes nothing). */
  state(): World {
    return cloneWorld(this.world);
  }

  get stepCount(): number {
    return this.steps;
  }

  reset(): ResetResult {
    this.world = cloneWorld(this.initial);
    this.steps = 0;
    this.done = false;
    const admissible = admissibleCommands(this.world);
    return { observation: introText(this.world), admissible_actions: admissible, info: this.info(false, admissible) };
  }

  step(action: string): StepResult {
    if (this.done) throw new EpisodeDoneError(`household: episode "${this.task}" is over; reset or create a new session`);
    const observation = execute(this.world, action);
    this.steps++;
    const won = isWon(this.world);
    this.done = won || this.steps >= HOUSEHOLD_MAX_STEPS;
    const admissible = admissibleCommands(this.world);
    return { observation, reward: won ? HOUSEHOLD_WIN_REWARD : 0, done: this.done, admissible_actions: admissible, info: this.info(won, admissible) };
  }

  close(): void {}

  private info(won: boolean, admissible: string[]): HouseholdInfo {
    return { won, task_type: this.world.task.type, admissible_commands: admissible, expert_action: nextExpertAction(this.world) };
  }
}

export class HouseholdEnvironment implements Environment {
  readonly name = 'household';
  readonly version = '2.0.0';
  readonly maxSteps = HOUSEHOLD_MAX_STEPS;

  create(opts: CreateOptions): HouseholdSession {
    return new HouseholdSession(generateWorld(opts.split, opts.seed, opts.task));
  }
}
