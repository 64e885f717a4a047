// The household environment (ALFWorld text format) behind the shared Environment contract.

import { isSplit, SPLITS, type CreateOptions, type EnvInfo, type EnvSession, type Environment, type ResetResult, type StepResult } from '../../src/envs/types.ts';
import { EnvInputError, EpisodeDoneError } from '../errors.ts';
import { admissibleCommands, execute } from './commands.ts';
import { feedbackInGrammar, fromGrammar, toGrammar, type PlacingGrammar } from './dialect.ts';
import { nextExpertAction } from './expert.ts';
import { generateWorld } from './generate.ts';
import { isWon } from './goal.ts';
import { introText } from './text.ts';
import { cloneWorld, type World } from './world.ts';

export const HOUSEHOLD_MAX_STEPS = 50;
export const HOUSEHOLD_WIN_REWARD = 10;

/** How a household game words and offers its commands. */
export interface HouseholdOptions {
  /** "move X to Y" (ALFWorld 0.4+, default) or "put X in/on Y" (ALFWorld 0.3.3, AgentGym's server). */
  grammar?: PlacingGrammar;
  /** Also admit `examine` on the objects in view and `help`, as ALFWorld does (default false: the set the bundled model knows). */
  fullCommands?: boolean;
}

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

  private readonly grammar: PlacingGrammar;
  private readonly fullCommands: boolean;

  constructor(private readonly initial: World, opts: HouseholdOptions = {}) {
    this.task = initial.task.sentence;
    this.world = cloneWorld(initial);
    this.grammar = opts.grammar ?? 'move';
    this.fullCommands = opts.fullCommands ?? false;
  }

  private admissible(): string[] {
    return admissibleCommands(this.world, { fullCommands: this.fullCommands }).map((c) => toGrammar(c, this.grammar)).sort();
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
    const admissible = this.admissible();
    return { observation: introText(this.world), admissible_actions: admissible, info: this.info(false, admissible) };
  }

  step(action: string): StepResult {
    if (this.done) throw new EpisodeDoneError(`household: episode "${this.task}" is over; reset or create a new session`);
    const observation = feedbackInGrammar(execute(this.world, fromGrammar(action, this.grammar), { fullCommands: this.fullCommands }), this.grammar);
    this.steps++;
    const won = isWon(this.world);
    this.done = won || this.steps >= HOUSEHOLD_MAX_STEPS;
    const admissible = this.admissible();
    return { observation, reward: won ? HOUSEHOLD_WIN_REWARD : 0, done: this.done, admissible_actions: admissible, info: this.info(won, admissible) };
  }

  close(): void {}

  private info(won: boolean, admissible: string[]): HouseholdInfo {
    const expert = nextExpertAction(this.world);
    return { won, task_type: this.world.task.type, admissible_commands: admissible, expert_action: expert === null ? null : toGrammar(expert, this.grammar) };
  }
}

export class HouseholdEnvironment implements Environment {
  readonly name = 'household';
  readonly version = '2.0.0';
  readonly maxSteps = HOUSEHOLD_MAX_STEPS;

  constructor(private readonly options: HouseholdOptions = {}) {}

  create(opts: CreateOptions): HouseholdSession {
    if (!isSplit(opts.split)) throw new EnvInputError(`household: unknown split "${opts.split}" (expected one of ${SPLITS.join(', ')})`);
    return new HouseholdSession(generateWorld(opts.split, opts.seed, opts.task), this.options);
  }
}
