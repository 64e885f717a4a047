// Where `train --method sft` gets its (prompt, response) turns: a JSONL file of
// trajectory records (the agent loop's rollout logs, or anything written in that
// shape), or the environment's expert. Only won, error-free episodes are imitated,
// and of those only turns whose response parsed as an action (a file of RL rollouts
// thus gives rejection-sampling fine-tuning).
//
// A sample is token ids, never text to re-encode: the prompt as the agent loop renders
// it, and the response as the engine sampled it (a rollout log's responseIds: an end
// token only where one was sampled) or, for text (expert answers, records written
// without ids), as the chat template renders the assistant's turn.
//
// An in-process environment whose plugin writes its own expert demonstrations
// (household: the searching expert with its reasons and recovery detours, the recipe
// the bundled model was made with) uses those; any other environment, or a server,
// plays the environment's `expert_action` through the agent loop with ExpertEngine, so
// the prompts are the ones the loop renders for that environment.

import { storage } from '../storage/storage.ts';
import { SPLITS, type Split } from '../envs/types.ts';
import { THINKING_MODES, thinkingFormat, type ThinkingMode } from '../tokenizer/thinking.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { runRollout } from '../rollout/agent_loop.ts';
import { checkEnvFailures, countEnvFailures } from '../rollout/env_failures.ts';
import { encodeTurnPrompt, renderedResponseIds, TemplateTurnError } from '../rollout/tokenize_turn.ts';
import type { SftSample } from './sft.ts';
import { ExpertEngine } from '../engines/expert_engine.ts';
import type { TrajectoryRecord } from '../rollout/sample.ts';
import type { TrainConfig } from '../config/config_schema.ts';
import { agentSpec, makeEnvironment } from '../envs/environment.ts';
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
    const ids = turn.responseIds;
    if (ids !== undefined && !(Array.isArray(ids) && ids.length > 0 && ids.every((id) => Number.isSafeInteger(id) && id >= 0))) {
      throw fieldError(where, `turns[${i}].responseIds`, 'a non-empty list of token ids when present', ids);
    }
  });
  if (r.thinking !== undefined && !THINKING_MODES.includes(r.thinking as ThinkingMode)) throw fieldError(where, 'thinking', `one of ${THINKING_MODES.join(', ')} when present`, r.thinking);
  return value as TrajectoryRecord;
}

/** Reads and checks every line of a JSONL file of trajectory records; blank lines are skipped. */
export function readSftRecords(file: string): TrajectoryRecord[] {
  let text: string;
  try {
    text = storage().readText(file);
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
  /** The thinking mode the records were rendered with, where they say (rollout logs). */
  thinking?: ThinkingMode;
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
  const modes = new Set(records.flatMap((r) => (r.thinking === undefined ? [] : [r.thinking])));
  if (modes.size > 1) throw new SftDataError(`the records were sampled under different thinking modes (${[...modes].join(', ')}); SFT takes one mode's turns at a time`);
  for (const r of records) {
    if (!r.won || r.error !== undefined) {
      skippedEpisodes++;
      continue;
    }
    r.turns.forEach((t, turn) => {
      if (t.valid === false) skippedTurns++;
      else {
        const sample: ExpertTurn = { prompt: t.prompt, response: t.response, split: r.split as Split, seed: r.seed, turn, taskType: r.taskType };
        if (t.responseIds !== undefined) sample.responseIds = t.responseIds;
        samples.push(sample);
      }
    });
  }
  const selection: TurnSelection = { samples, skippedEpisodes, skippedTurns };
  if (modes.size === 1) selection.thinking = [...modes][0];
  return selection;
}

/** A special token (the end token the recording engine decoded into the text) at the very end of a response, which the template would otherwise see as text and double. */
function withoutTrailingSpecial(tokenizer: Tokenizer, response: string): string {
  const ids = tokenizer.encode(response, { addSpecialTokens: false });
  const last = ids.length > 0 ? ids[ids.length - 1] : undefined;
  if (last === undefined || !tokenizer.eosTokenIds.includes(last)) return response;
  const tail = tokenizer.decode([last]);
  return response.endsWith(tail) ? response.slice(0, response.length - tail.length) : response;
}

/**
 * One SFT sample: the prompt ids the agent loop renders for the turn (left-truncated
 * to the prompt budget), and the response's recorded ids or, without them, the chat
 * template's rendering of the answer (src/rollout/tokenize_turn.ts renderedResponseIds).
 * `where` names the turn in errors.
 */
export function sftSample(tokenizer: Tokenizer, turn: ExpertTurn, maxPromptTokens: number, thinking: ThinkingMode, where: string): SftSample {
  const enableThinking = thinkingFormat(tokenizer, thinking).enableThinking;
  const promptIds = encodeTurnPrompt(tokenizer, turn.prompt, maxPromptTokens, enableThinking).ids;
  if (turn.responseIds !== undefined) return { promptIds, responseIds: [...turn.responseIds] };
  try {
    return { promptIds, responseIds: renderedResponseIds(tokenizer, turn.prompt, withoutTrailingSpecial(tokenizer, turn.response), enableThinking) };
  } catch (e) {
    if (e instanceof TemplateTurnError) throw new SftDataError(`${where}: ${e.message}`);
    throw e;
  }
}

/** Refuses records sampled under another thinking mode than the run's: their ids answer other prompts. */
export function checkThinking(sel: TurnSelection, thinking: ThinkingMode, source: string): void {
  if (sel.thinking !== undefined && sel.thinking !== thinking) {
    throw new SftDataError(`${source}: the records were sampled with model.thinking=${sel.thinking}, and this run renders prompts with model.thinking=${thinking}; set model.thinking=${sel.thinking}`);
  }
}

/** The selection's samples (checkThinking first). */
export function sftSamples(tokenizer: Tokenizer, sel: TurnSelection, maxPromptTokens: number, thinking: ThinkingMode, source: string): SftSample[] {
  checkThinking(sel, thinking, source);
  return sel.samples.map((s) => sftSample(tokenizer, s, maxPromptTokens, thinking, `${source}: ${s.split} seed ${s.seed} turn ${s.turn}`));
}

/** `episodes` expert episodes on the run's training split, their seeds drawn from `rng`. */
export async function expertSamples(cfg: TrainConfig, tokenizer: Tokenizer, episodes: number, rng: Rng): Promise<TurnSelection> {
  const split = cfg.env.trainSplit as Split;
  const seeds = Array.from({ length: episodes }, () => rng.nextU32() % SEED_RANGE);
  const plugin = envPlugin(cfg.env.name);
  const thinking = thinkingFormat(tokenizer, cfg.model.thinking);
  if (plugin.expert && !cfg.env.url) {
    const samples = [...plugin.expert.samples({ split, seeds, detour: plugin.expert.defaultDetour, rngSeed: rng.seed(), reasoning: thinking.reasoning })];
    return { samples, skippedEpisodes: 0, skippedTurns: 0 };
  }
  const spec = agentSpec(cfg);
  const { trajectories } = await runRollout({
    env: makeEnvironment(cfg),
    spec,
    engine: new ExpertEngine(tokenizer, spec, thinking),
    tokenizer,
    thinking: cfg.model.thinking,
    tasks: seeds.map((seed) => ({ split, seed })),
    groupSize: 1,
    maxPromptTokens: cfg.rollout.maxPromptTokens,
    maxResponseTokens: cfg.rollout.maxResponseTokens,
    maxTurns: cfg.rollout.maxTurns,
    stopAfterAction: cfg.rollout.stopAfterAction,
    concurrency: cfg.rollout.concurrency,
    envTimeoutMs: cfg.env.timeoutMs,
  });
  // Episodes that failed in the environment (a server or retriever that is down) stop the run as in RL.
  checkEnvFailures(countEnvFailures(trajectories), cfg.env.maxFailedShare, 'expert demonstrations');
  return selectTurns(trajectories);
}
