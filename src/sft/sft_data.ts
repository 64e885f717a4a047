// Where `train --method sft` gets its (prompt, response) turns: a JSONL file of
// trajectory records (the agent loop's rollout logs, or anything written in that
// shape), or the environment's expert. Only won, error-free episodes are imitated,
// and of those only turns whose response parsed as an action (a file of RL rollouts
// thus gives rejection-sampling fine-tuning).
//
// An in-process environment whose plugin writes its own expert demonstrations
// (household: the searching expert with its reasons and recovery detours, the recipe
// the bundled model was made with) uses those; any other environment, or a server,
// plays the environment's `expert_action` through the agent loop with ExpertEngine, so
// the prompts are the ones the loop renders for that environment.

import * as fs from 'node:fs';
import { SPLITS, type Split } from '../envs/types.ts';
import type { Tokenizer } from '../models/tokenizer.ts';
import { runRollout } from '../rollout/agent_loop.ts';
import { ExpertEngine } from '../rollout/expert_engine.ts';
import type { TrajectoryRecord } from '../rollout/sample.ts';
import type { TrainConfig } from '../config/config_schema.ts';
import { makeEnvironment } from '../eval/environment.ts';
import { envPlugin } from '../../envs/registry.ts';
import type { ExpertTurn } from '../envs/plugin.ts';
import type { Rng } from '../util/random.ts';

/** A data file that is not JSONL of trajectory records; the message names the file and line. */
export class SftDataError extends Error {
  override name = 'SftDataError';
}

/** The environments' seeds are drawn in [0, 1e9), as the RL loop draws its tasks. */
const SEED_RANGE = 1_000_000_000;

function fieldError(where: string, field: string, expected: string, got: unknown): SftDataError {
  const shown = JSON.stringify(got);
  return new SftDataError(`${where}: ${field} must be ${expected}, got ${shown === undefined ? 'nothing' : shown.length > 60 ? `${shown.slice(0, 57)}...` : shown}`);
}

function checkRecord(value: unknown, where: string): TrajectoryRecord {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw fieldError(where, 'the line', 'a JSON object (a trajectory record)', value);
  const r = value as Record<string, unknown>;
  if (typeof r.split !== 'string' || !SPLITS.includes(r.split as Split)) throw fieldError(where, 'split', `one of ${SPLITS.join(', ')}`, r.split);
  if (!Number.isSafeInteger(r.seed)) throw fieldError(where, 'seed', 'an integer', r.seed);
  if (typeof r.taskType !== 'string') throw fieldError(where, 'taskType', 'a string', r.taskType);
  if (typeof r.won !== 'boolean') throw fieldError(where, 'won', 'true or false', r.won);
  if (r.error !== undefined && typeof r.error !== 'string') throw fieldError(where, 'error', 'a string when present', r.error);
  if (!Array.isArray(r.turns)) throw fieldError(where, 'turns', 'an array of {prompt, response}', r.turns);
  // A conversation's later prompts are only the environment's answers: alone they are not the prompt the model read.
  if (r.history !== undefined) throw fieldError(where, 'history', 'absent (SFT trains on window prompts; this episode was a conversation, rollout.history conversation)', r.history);
  r.turns.forEach((t: unknown, i) => {
    const turn = t as Record<string, unknown> | null;
    if (turn === null || typeof turn !== 'object') throw fieldError(where, `turns[${i}]`, 'an object', t);
    if (typeof turn.prompt !== 'string' || turn.prompt === '') throw fieldError(where, `turns[${i}].prompt`, 'a non-empty string', turn.prompt);
    if (typeof turn.response !== 'string' || turn.response === '') throw fieldError(where, `turns[${i}].response`, 'a non-empty string', turn.response);
    if (turn.valid !== undefined && typeof turn.valid !== 'boolean') throw fieldError(where, `turns[${i}].valid`, 'true or false when present', turn.valid);
  });
  return value as TrajectoryRecord;
}

/** Reads and checks every line of a JSONL file of trajectory records; blank lines are skipped. */
export function readSftRecords(file: string): TrajectoryRecord[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new SftDataError(`algorithm.sft.data: cannot read ${file} (${(e as Error).message})`);
  }
  const records: TrajectoryRecord[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${file}:${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      throw new SftDataError(`${where}: not JSON (${(e as Error).message})`);
    }
    records.push(checkRecord(value, where));
  });
  if (records.length === 0) throw new SftDataError(`${file}: no trajectory records`);
  return records;
}

export interface TurnSelection {
  samples: ExpertTurn[];
  /** Episodes left out: lost, or failed with an error. */
  skippedEpisodes: number;
  /** Turns of kept episodes left out because their response did not parse as an action. */
  skippedTurns: number;
}

/** The turns worth imitating: every valid turn of every won, error-free episode. */
export function selectTurns(records: readonly TrajectoryRecord[]): TurnSelection {
  const samples: ExpertTurn[] = [];
  let skippedEpisodes = 0;
  let skippedTurns = 0;
  for (const r of records) {
    if (!r.won || r.error !== undefined) {
      skippedEpisodes++;
      continue;
    }
    r.turns.forEach((t, turn) => {
      if (t.valid === false) skippedTurns++;
      else samples.push({ prompt: t.prompt, response: t.response, split: r.split as Split, seed: r.seed, turn, taskType: r.taskType });
    });
  }
  return { samples, skippedEpisodes, skippedTurns };
}

/** `episodes` expert episodes on the run's training split, their seeds drawn from `rng`. */
export async function expertSamples(cfg: TrainConfig, tokenizer: Tokenizer, episodes: number, rng: Rng): Promise<TurnSelection> {
  const split = cfg.env.trainSplit as Split;
  const seeds = Array.from({ length: episodes }, () => rng.nextU32() % SEED_RANGE);
  const plugin = envPlugin(cfg.env.name);
  if (plugin.expert && !cfg.env.url) {
    const samples = [...plugin.expert.samples({ split, seeds, detour: plugin.expert.defaultDetour, rngSeed: rng.seed() })];
    return { samples, skippedEpisodes: 0, skippedTurns: 0 };
  }
  const { trajectories } = await runRollout({
    env: makeEnvironment(cfg),
    spec: plugin.agent,
    engine: new ExpertEngine(tokenizer, plugin.agent),
    tokenizer,
    tasks: seeds.map((seed) => ({ split, seed })),
    groupSize: 1,
    maxPromptTokens: cfg.rollout.maxPromptTokens,
    maxResponseTokens: cfg.rollout.maxResponseTokens,
    maxTurns: cfg.rollout.maxTurns,
    stopAfterAction: cfg.rollout.stopAfterAction,
    concurrency: cfg.rollout.concurrency,
    envTimeoutMs: cfg.env.timeoutMs,
  });
  return selectTurns(trajectories);
}
