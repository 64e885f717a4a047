// The multi-turn agent loop (docs/ALGORITHMS.md section 1): runs each task G
// times against an environment (in-process or over HTTP), one engine.generate call per
// round for every live episode so the engine sees one large batch, and turns every
// environment step into a step-wise training sample (its prompt rendered fresh, or the
// episode's chat so far: rollout.history).
//
// Failure policy. An environment that fails or times out (server gone, connection
// refused) fails only that trajectory: it gets an `error` in its TrajectoryRecord and
// yields no samples at all (its return is unknown, so no turn of it can be scored; the
// reference drops them too); the other episodes go on. An episode whose server lost
// it (an environment server's session, or the inference server running it, which an
// engine with several servers reports per request) starts over from its first turn.
// Any other engine failure fails the whole rollout (every episode waits on it) with a
// RolloutError naming the engine, after closing the open sessions.

import type { AgentSpec } from '../envs/agent_spec.ts';
import type { SkillsPlacement } from '../envs/skills_block.ts';
import type { Environment } from '../envs/types.ts';
import { thinkingFormat, type ThinkingMode } from '../tokenizer/thinking.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { PromptHistory } from './conversation.ts';
import type { Engine, GenerationRequest, GenerationResult, SamplingParams } from '../engines/engine.ts';
import { Episode, errorMessage, type EpisodeContext, type RolloutTask, type SkillsMode } from './episode.ts';
import type { StepSample, TrajectoryRecord } from './sample.ts';
import type { TrajectoryLog } from './trajectory_log.ts';

export { requestSeed, type RolloutTask, type SkillsMode } from './episode.ts';

export interface RolloutProgress {
  round: number;
  total: number;
  running: number;
  completed: number;
  failed: number;
  turns: number;
  tokensGenerated: number;
  elapsedSeconds: number;
}

export interface RolloutOptions {
  env: Environment;
  /** The environment's turn contract (its plugin's agent). */
  spec: AgentSpec;
  engine: Engine;
  tokenizer: Tokenizer;
  /** enable_thinking for the chat template (model.thinking), which the environment prompts' reasoning format follows; default 'off', as the SDAR reference's Qwen3 launchers. */
  thinking?: ThinkingMode;
  tasks: readonly RolloutTask[];
  /** G: runs per task, sharing one groupId. */
  groupSize: number;
  /** Default temperature 1, no top-p/top-k; `seed` set makes every request's seed derive from it, distinct per run and turn. */
  sampling?: Partial<Omit<SamplingParams, 'maxTokens'>>;
  maxPromptTokens: number;
  maxResponseTokens: number;
  /** Episodes live at once (default: all). */
  concurrency?: number;
  withSkills?: SkillsMode;
  /**
   * End each response at its action's closing tag (the spec's actionStops) and train
   * only up to there; default false: responses run to the end of the turn and every
   * generated token, the end-of-turn token included, is trained, as in the reference.
   */
  stopAfterAction?: boolean;
  /** Where a teacher prompt puts the skills block (default: before the templated prompt, as the reference). */
  teacherSkillsPlacement?: SkillsPlacement;
  /** How a prompt carries the episode so far (default `window`: the spec's prompt with its recent turns, as the reference). */
  history?: PromptHistory;
  /** Default: the spec's turn cap. */
  maxTurns?: number;
  /** c_inv, subtracted from the score of every turn whose response did not parse as an action (default 0). */
  invalidPenalty?: number;
  /** Deadline for each environment call (create, reset, step, close); default 120 s. */
  envTimeoutMs?: number;
  /** Engine model name (a LoRA adapter name on a vLLM server). */
  model?: string;
  /** Prepended to group ids, e.g. "it12/", to keep them unique across iterations. */
  groupIdPrefix?: string;
  trajectoryLog?: TrajectoryLog;
  /** Awaited after every round. */
  onProgress?: (p: RolloutProgress) => void | Promise<void>;
}

export interface TypeStats {
  trajectories: number;
  won: number;
  successRate: number;
}

export interface RolloutStats {
  /** All trajectories run, failed ones included. */
  trajectories: number;
  failed: number;
  /** The rates and means below are over completed (not failed) trajectories. */
  completed: number;
  samples: number;
  successRate: number;
  successByType: Record<string, TypeStats>;
  meanReturn: number;
  meanEpisodeLength: number;
  turns: number;
  invalidActionRate: number;
  /** Episodes the loop stopped at the turn cap. */
  truncatedEpisodes: number;
  /** Mean native score over trajectories whose environment reports one (shop); null otherwise. */
  envScoreMean: number | null;
  /** Engine cost, failed trajectories included. */
  promptTokens: number;
  tokensGenerated: number;
  truncatedPrompts: number;
  teacherPromptTokens: number;
  truncatedTeacherPrompts: number;
  engineCalls: number;
  generateSeconds: number;
  wallSeconds: number;
}

export interface RolloutResult {
  /** Samples of completed trajectories, in trajectory then turn order. */
  samples: StepSample[];
  /** Every trajectory in task order (G per task), failed ones with `error`. */
  trajectories: TrajectoryRecord[];
  stats: RolloutStats;
}

export class RolloutError extends Error {
  override name = 'RolloutError';
}

const DEFAULT_ENV_TIMEOUT_MS = 120_000;

function checkOptions(o: RolloutOptions): void {
  const positive = (name: string, v: number | undefined) => {
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new RangeError(`runRollout: ${name} must be a positive integer, got ${v}`);
  };
  positive('groupSize', o.groupSize);
  positive('maxPromptTokens', o.maxPromptTokens);
  positive('maxResponseTokens', o.maxResponseTokens);
  positive('concurrency', o.concurrency);
  positive('maxTurns', o.maxTurns);
  positive('envTimeoutMs', o.envTimeoutMs);
  if (o.invalidPenalty !== undefined && !(Number.isFinite(o.invalidPenalty) && o.invalidPenalty >= 0)) {
    throw new RangeError(`runRollout: invalidPenalty must be a finite number >= 0, got ${o.invalidPenalty}`);
  }
}

/**
 * The prompt budget a turn can use: rollout.maxPromptTokens, less where the engine's
 * context could not then hold the response (prompt + maxResponseTokens), since a prompt
 * is left-truncated to it and the engine refuses a request past its context.
 */
export function promptBudget(maxPromptTokens: number, maxResponseTokens: number, contextLength: number | undefined): number {
  const budget = contextLength === undefined ? maxPromptTokens : Math.min(maxPromptTokens, contextLength - maxResponseTokens);
  if (budget < 1) throw new RangeError(`runRollout: ${maxResponseTokens} response tokens leave no room for a prompt in the engine's context of ${contextLength} tokens`);
  return budget;
}

export async function runRollout(o: RolloutOptions): Promise<RolloutResult> {
  checkOptions(o);
  const started = performance.now();
  const cost = { promptTokens: 0, tokensGenerated: 0, truncatedPrompts: 0, teacherPromptTokens: 0, truncatedTeacherPrompts: 0, engineCalls: 0, generateMs: 0 };
  const ctx: EpisodeContext = {
    env: o.env,
    spec: o.spec,
    tokenizer: o.tokenizer,
    thinking: thinkingFormat(o.tokenizer, o.thinking ?? 'off'),
    withSkills: o.withSkills ?? 'none',
    teacherSkillsPlacement: o.teacherSkillsPlacement ?? 'before_template',
    sampling: { temperature: 1, topP: 1, topK: 0, ...o.sampling },
    maxPromptTokens: promptBudget(o.maxPromptTokens, o.maxResponseTokens, o.engine.contextLength),
    maxResponseTokens: o.maxResponseTokens,
    maxTurns: o.maxTurns ?? o.spec.maxTurns,
    stopAfterAction: o.stopAfterAction ?? false,
    history: o.history ?? 'window',
    envTimeoutMs: o.envTimeoutMs ?? DEFAULT_ENV_TIMEOUT_MS,
    cost,
  };
  const episodes = o.tasks.flatMap((request, g) => {
    const groupId = `${o.groupIdPrefix ?? ''}${g}:${request.split}:${request.seed}`;
    return Array.from({ length: o.groupSize }, (_, j) => new Episode(g * o.groupSize + j, groupId, `${groupId}/${j}`, request));
  });
  const concurrency = o.concurrency ?? Math.max(1, episodes.length);
  const queue = [...episodes];
  const running: Episode[] = [];
  const records = new Map<number, TrajectoryRecord>();
  let round = 0;

  const generate = async (requests: GenerationRequest[]): Promise<GenerationResult[]> => {
    const t0 = performance.now();
    let results: GenerationResult[];
    try {
      results = await o.engine.generate(requests, o.model === undefined ? undefined : { model: o.model });
    } catch (e) {
      throw new RolloutError(`rollout: engine "${o.engine.name}" failed generating ${requests.length} response(s) in round ${round}: ${errorMessage(e)}`, { cause: e });
    }
    cost.generateMs += performance.now() - t0;
    cost.engineCalls++;
    if (!Array.isArray(results) || results.length !== requests.length) {
      throw new RolloutError(`rollout: engine "${o.engine.name}" returned ${Array.isArray(results) ? results.length : 'no'} result(s) for ${requests.length} request(s)`);
    }
    results.forEach((r, i) => {
      // No log-probs at all is an engine that has none to report (the expert); a rollout correction refuses such turns.
      if (r.logprobs.length !== 0 && r.tokenIds.length !== r.logprobs.length) {
        throw new RolloutError(`rollout: engine "${o.engine.name}" result ${i} has ${r.tokenIds.length} token ids but ${r.logprobs.length} logprobs`);
      }
      cost.tokensGenerated += r.tokenIds.length;
    });
    return results;
  };

  const finish = (ep: Episode): void => {
    const record = ep.record(ctx.thinking);
    records.set(ep.index, record);
    o.trajectoryLog?.append(record);
  };

  const progress = (): RolloutProgress => {
    let failed = 0;
    for (const r of records.values()) if (r.error !== undefined) failed++;
    return {
      round,
      total: episodes.length,
      running: running.length,
      completed: records.size - failed,
      failed,
      turns: episodes.reduce((n, ep) => n + ep.turns.length, 0),
      tokensGenerated: cost.tokensGenerated,
      elapsedSeconds: (performance.now() - started) / 1000,
    };
  };

  try {
    while (queue.length > 0 || running.length > 0) {
      const starting = queue.splice(0, Math.max(0, concurrency - running.length));
      await Promise.all(starting.map((ep) => ep.open(ctx)));
      for (const ep of starting) {
        if (ep.error === undefined) running.push(ep);
        else finish(ep);
      }
      if (running.length === 0) continue;
      const turns = running.map((ep) => ep.prepare(ctx));
      const results = await generate(turns.map((t) => t.request));
      // An episode whose inference server was lost starts over; the engine runs it elsewhere.
      await Promise.all(running.map((ep, i) => (results[i].lost !== undefined ? ep.restart(ctx, `turn ${ep.turns.length}: ${results[i].lost}`) : ep.act(ctx, turns[i], results[i]))));
      const ended = running.filter((ep) => ep.finished);
      await Promise.all(ended.map((ep) => ep.close(ctx)));
      for (const ep of ended) {
        finish(ep);
        running.splice(running.indexOf(ep), 1);
      }
      round++;
      await o.onProgress?.(progress());
    }
  } catch (e) {
    await Promise.all(running.map((ep) => ep.close(ctx)));
    throw e;
  }

  const trajectories = episodes.map((ep) => records.get(ep.index)!);
  const samples = episodes.flatMap((ep) => (ep.error === undefined ? ep.scoredSamples(o.invalidPenalty ?? 0) : []));
  return { samples, trajectories, stats: summarize(trajectories, samples.length, cost, (performance.now() - started) / 1000) };
}

function summarize(
  trajectories: readonly TrajectoryRecord[],
  samples: number,
  cost: { promptTokens: number; tokensGenerated: number; truncatedPrompts: number; teacherPromptTokens: number; truncatedTeacherPrompts: number; engineCalls: number; generateMs: number },
  wallSeconds: number,
): RolloutStats {
  const done = trajectories.filter((t) => t.error === undefined);
  const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
  const successByType: Record<string, TypeStats> = {};
  for (const t of done) {
    const s = (successByType[t.taskType] ??= { trajectories: 0, won: 0, successRate: 0 });
    s.trajectories++;
    if (t.won) s.won++;
  }
  for (const s of Object.values(successByType)) s.successRate = s.won / s.trajectories;
  const turns = done.reduce((n, t) => n + t.turns.length, 0);
  const invalid = done.reduce((n, t) => n + t.turns.filter((u) => !u.valid).length, 0);
  const scores = done.flatMap((t) => (t.envScore === undefined ? [] : [t.envScore]));
  const { generateMs, ...engine } = cost;
  return {
    trajectories: trajectories.length,
    failed: trajectories.length - done.length,
    completed: done.length,
    samples,
    successRate: mean(done.map((t) => (t.won ? 1 : 0))),
    successByType,
    meanReturn: mean(done.map((t) => t.episodeReturn)),
    meanEpisodeLength: mean(done.map((t) => t.turns.length)),
    turns,
    invalidActionRate: turns === 0 ? 0 : invalid / turns,
    truncatedEpisodes: done.filter((t) => t.truncated).length,
    envScoreMean: scores.length === 0 ? null : mean(scores),
    ...engine,
    generateSeconds: generateMs / 1000,
    wallSeconds,
  };
}
