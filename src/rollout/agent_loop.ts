// The multi-turn agent loop (shared design ALGORITHMS.md section 1): runs each task G
// times against an environment (in-process or over HTTP), one engine.generate call per
// round for every live episode so the engine sees one large batch, and turns every
// environment step into a step-wise training sample with a fresh prompt.
//
// Failure policy. An environment that fails or times out (server gone, connection
// refused) fails only that trajectory: it gets an `error` in its TrajectoryRecord and
// yields no samples at all (its return is unknown, so no turn of it can be scored; the
// reference drops them too); the other episodes go on. An engine failure fails the
// whole rollout (every episode waits on it) with a RolloutError naming the engine,
// after closing the open sessions.

import type { EnvInfo, EnvSession, Environment, Split } from '../envs/types.ts';
import type { Tokenizer } from '../models/tokenizer.ts';
import { agentSpec, type AgentSpec, type TurnHistoryEntry } from './agent_spec.ts';
import type { Engine, GenerationRequest, GenerationResult, SamplingParams } from './engine.ts';
import type { StepSample, TrajectoryRecord } from './sample.ts';
import { cutTokens, encodePrefixedTurnPrompt, encodeTurnPrompt } from './tokenize_turn.ts';
import { skillBlock, type SkillsPlacement } from '../envs/skills_block.ts';
import type { TrajectoryLog } from './trajectory_log.ts';

export interface RolloutTask {
  split: Split;
  seed: number;
  /** An explicit task (environment-specific JSON) instead of the one the seed draws. */
  task?: unknown;
}

/** Where the skills block goes: nowhere, the policy's own prompt (Skill-GRPO), or a teacher prompt next to it. */
export type SkillsMode = 'none' | 'policy' | 'teacher';

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
  /** Default: agentSpec(env.name). */
  spec?: AgentSpec;
  engine: Engine;
  tokenizer: Tokenizer;
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
  /** Where a teacher prompt puts the skills block (default: at the start of the user message). */
  teacherSkillsPlacement?: SkillsPlacement;
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

type PendingSample = Omit<StepSample, 'score' | 'episodeReturn' | 'won'>;

interface Episode {
  index: number;
  groupId: string;
  trajectoryId: string;
  request: RolloutTask;
  session: EnvSession | null;
  task: string;
  taskType: string;
  skills: string | undefined;
  observation: string;
  admissible: string[];
  info: EnvInfo | null;
  history: TurnHistoryEntry[];
  turns: TrajectoryRecord['turns'];
  samples: PendingSample[];
  episodeReturn: number;
  won: boolean;
  envScore: number | undefined;
  done: boolean;
  truncated: boolean;
  error: string | undefined;
}

interface PreparedTurn {
  prompt: string;
  promptIds: number[];
  promptTruncated: boolean;
  teacherPromptIds: number[] | undefined;
  request: GenerationRequest;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn` as a promise, so synchronous environments and throws take the async path. */
function attempt<T>(fn: () => Promise<T> | T): Promise<T> {
  return Promise.resolve().then(fn);
}

/**
 * A per-request sampling seed from the rollout's base seed: the G runs of one task
 * see the same prompt at turn 0, and must not draw the same tokens. 31 bits, since
 * servers read it as an int32.
 */
export function requestSeed(base: number, trajectory: number, turn: number): number {
  let h = (base ^ Math.imul(trajectory + 1, 0x9e3779b1) ^ Math.imul(turn + 1, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 1;
}

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

export async function runRollout(o: RolloutOptions): Promise<RolloutResult> {
  checkOptions(o);
  const started = performance.now();
  const spec = o.spec ?? agentSpec(o.env.name);
  const maxTurns = o.maxTurns ?? spec.maxTurns;
  const invalidPenalty = o.invalidPenalty ?? 0;
  const envTimeoutMs = o.envTimeoutMs ?? DEFAULT_ENV_TIMEOUT_MS;
  const withSkills = o.withSkills ?? 'none';
  const sampling = { temperature: 1, topP: 1, topK: 0, ...o.sampling };
  const stopAfterAction = o.stopAfterAction ?? false;
  const stop = [...new Set([...(stopAfterAction ? (spec.actionStops ?? []) : []), ...(sampling.stop ?? [])])];
  const envName = o.env.name;
  const cost = { promptTokens: 0, tokensGenerated: 0, truncatedPrompts: 0, teacherPromptTokens: 0, truncatedTeacherPrompts: 0, engineCalls: 0, generateMs: 0 };

  const episodes: Episode[] = o.tasks.flatMap((request, g) => {
    const groupId = `${o.groupIdPrefix ?? ''}${g}:${request.split}:${request.seed}`;
    return Array.from({ length: o.groupSize }, (_, j) => ({
      index: g * o.groupSize + j,
      groupId,
      trajectoryId: `${groupId}/${j}`,
      request,
      session: null,
      task: '',
      taskType: 'unknown',
      skills: undefined,
      observation: '',
      admissible: [],
      info: null,
      history: [],
      turns: [],
      samples: [],
      episodeReturn: 0,
      won: false,
      envScore: undefined,
      done: false,
      truncated: false,
      error: undefined,
    }));
  });
  const concurrency = o.concurrency ?? Math.max(1, episodes.length);
  const queue = [...episodes];
  const running: Episode[] = [];
  const records = new Map<number, TrajectoryRecord>();
  let round = 0;

  const closeSession = async (ep: Episode): Promise<void> => {
    const session = ep.session;
    ep.session = null;
    if (session === null) return;
    // The episode's outcome is already known; a session that will not close is the server's to reclaim.
    await withTimeout(attempt(() => session.close()), envTimeoutMs, 'close').catch(() => undefined);
  };

  const open = async (ep: Episode): Promise<void> => {
    const { split, seed, task } = ep.request;
    const creating = attempt(() => o.env.create({ split, seed, task }));
    try {
      ep.session = await withTimeout(creating, envTimeoutMs, `${envName} create`);
      const first = await withTimeout(attempt(() => ep.session!.reset()), envTimeoutMs, `${envName} reset`);
      ep.task = ep.session.task;
      ep.taskType = first.info.task_type;
      ep.observation = first.observation;
      ep.admissible = first.admissible_actions;
      ep.info = first.info;
      if (withSkills !== 'none') ep.skills = spec.skills(ep.taskType);
    } catch (e) {
      ep.error = `starting the episode (split ${split}, seed ${seed}): ${message(e)}`;
      // A session that arrives after its deadline would otherwise live on the server until reclaimed.
      if (ep.session === null) void creating.then((s) => s.close()).catch(() => undefined);
      else await closeSession(ep);
    }
  };

  const prepare = (ep: Episode): PreparedTurn => {
    const turn = ep.turns.length;
    const input = { task: ep.task, history: ep.history, observation: ep.observation, admissibleActions: ep.admissible };
    const prompt = spec.renderPrompt(withSkills === 'policy' ? { ...input, skills: ep.skills } : input);
    const encoded = encodeTurnPrompt(o.tokenizer, prompt, o.maxPromptTokens);
    cost.promptTokens += encoded.ids.length;
    if (encoded.truncated) cost.truncatedPrompts++;
    let teacherPromptIds: number[] | undefined;
    if (withSkills === 'teacher') {
      const teacher = o.teacherSkillsPlacement === 'before_template'
        ? encodePrefixedTurnPrompt(o.tokenizer, skillBlock(ep.skills!.trim()), prompt, o.maxPromptTokens)
        : encodeTurnPrompt(o.tokenizer, spec.renderPrompt({ ...input, skills: ep.skills }), o.maxPromptTokens);
      teacherPromptIds = teacher.ids;
      cost.teacherPromptTokens += teacher.ids.length;
      if (teacher.truncated) cost.truncatedTeacherPrompts++;
    }
    const params: SamplingParams = { ...sampling, maxTokens: o.maxResponseTokens, stop };
    if (sampling.seed !== undefined) params.seed = requestSeed(sampling.seed, ep.index, turn);
    const context = {
      env: spec.env,
      trajectoryId: ep.trajectoryId,
      turn,
      task: ep.task,
      taskType: ep.taskType,
      observation: ep.observation,
      admissibleActions: ep.admissible,
      info: ep.info!,
    };
    return { prompt, promptIds: encoded.ids, promptTruncated: encoded.truncated, teacherPromptIds, request: { promptIds: encoded.ids, params, context } };
  };

  const generate = async (requests: GenerationRequest[]): Promise<GenerationResult[]> => {
    const t0 = performance.now();
    let results: GenerationResult[];
    try {
      results = await o.engine.generate(requests, o.model === undefined ? undefined : { model: o.model });
    } catch (e) {
      throw new RolloutError(`rollout: engine "${o.engine.name}" failed generating ${requests.length} response(s) in round ${round}: ${message(e)}`, { cause: e });
    }
    cost.generateMs += performance.now() - t0;
    cost.engineCalls++;
    if (!Array.isArray(results) || results.length !== requests.length) {
      throw new RolloutError(`rollout: engine "${o.engine.name}" returned ${Array.isArray(results) ? results.length : 'no'} result(s) for ${requests.length} request(s)`);
    }
    results.forEach((r, i) => {
      if (r.tokenIds.length !== r.logprobs.length) {
        throw new RolloutError(`rollout: engine "${o.engine.name}" result ${i} has ${r.tokenIds.length} token ids but ${r.logprobs.length} logprobs`);
      }
      cost.tokensGenerated += r.tokenIds.length;
    });
    return results;
  };

  const act = async (ep: Episode, turn: PreparedTurn, result: GenerationResult): Promise<void> => {
    let { tokenIds, logprobs, text } = result;
    const cut = stopAfterAction ? spec.cutResponse(text) : text;
    if (cut !== text) {
      const kept = cutTokens(o.tokenizer, tokenIds, cut);
      tokenIds = tokenIds.slice(0, kept.keep);
      logprobs = logprobs.slice(0, kept.keep);
      text = kept.text;
    }
    const parsed = spec.parse(text);
    const index = ep.turns.length;
    let step;
    try {
      step = await withTimeout(attempt(() => ep.session!.step(parsed.send)), envTimeoutMs, `${envName} step`);
    } catch (e) {
      ep.error = `turn ${index}: ${message(e)}`;
      return;
    }
    ep.turns.push({
      prompt: turn.prompt,
      response: text,
      action: parsed.send,
      valid: parsed.valid,
      observation: step.observation,
      reward: step.reward,
      promptTokens: turn.promptIds.length,
      responseTokens: tokenIds.length,
      promptTruncated: turn.promptTruncated,
    });
    const sample: PendingSample = {
      groupId: ep.groupId,
      trajectoryId: ep.trajectoryId,
      turn: index,
      taskType: ep.taskType,
      promptIds: turn.promptIds,
      responseIds: tokenIds,
      responseLogprobs: logprobs,
      valid: parsed.valid,
      state: ep.observation,
    };
    if (turn.teacherPromptIds !== undefined) sample.teacherPromptIds = turn.teacherPromptIds;
    ep.samples.push(sample);
    ep.history.push({ observation: ep.observation, action: parsed.historyAction });
    ep.observation = step.observation;
    ep.admissible = step.admissible_actions;
    ep.info = step.info;
    ep.episodeReturn += step.reward;
    ep.won = step.info.won;
    if (typeof step.info.score === 'number') ep.envScore = step.info.score;
    if (step.done) ep.done = true;
    else if (ep.turns.length >= maxTurns) ep.done = ep.truncated = true;
  };

  const finish = (ep: Episode): void => {
    const record: TrajectoryRecord = {
      trajectoryId: ep.trajectoryId,
      groupId: ep.groupId,
      task: ep.task,
      taskType: ep.taskType,
      split: ep.request.split,
      seed: ep.request.seed,
      won: ep.error === undefined && ep.won,
      episodeReturn: ep.episodeReturn,
      turns: ep.turns,
      truncated: ep.truncated,
    };
    if (ep.envScore !== undefined) record.envScore = ep.envScore;
    if (ep.error !== undefined) record.error = ep.error;
    records.set(ep.index, record);
    o.trajectoryLog?.append(record);
  };

  const progress = (): RolloutProgress => {
    let failed = 0;
    for (const r of records.values()) if (r.error !== undefined) failed++;
    let turns = 0;
    for (const ep of episodes) turns += ep.turns.length;
    return {
      round,
      total: episodes.length,
      running: running.length,
      completed: records.size - failed,
      failed,
      turns,
      tokensGenerated: cost.tokensGenerated,
      elapsedSeconds: (performance.now() - started) / 1000,
    };
  };

  try {
    while (queue.length > 0 || running.length > 0) {
      const starting = queue.splice(0, Math.max(0, concurrency - running.length));
      await Promise.all(starting.map(open));
      for (const ep of starting) {
        if (ep.error === undefined) running.push(ep);
        else finish(ep);
      }
      if (running.length === 0) continue;
      const turns = running.map(prepare);
      const results = await generate(turns.map((t) => t.request));
      await Promise.all(running.map((ep, i) => act(ep, turns[i], results[i])));
      const ended = running.filter((ep) => ep.done || ep.error !== undefined);
      await Promise.all(ended.map(closeSession));
      for (const ep of ended) {
        finish(ep);
        running.splice(running.indexOf(ep), 1);
      }
      round++;
      await o.onProgress?.(progress());
    }
  } catch (e) {
    await Promise.all(running.map(closeSession));
    throw e;
  }

  const trajectories = episodes.map((ep) => records.get(ep.index)!);
  const samples: StepSample[] = [];
  for (const ep of episodes) {
    if (ep.error !== undefined) continue;
    for (const s of ep.samples) {
      samples.push({ ...s, score: ep.episodeReturn - (s.valid ? 0 : invalidPenalty), episodeReturn: ep.episodeReturn, won: ep.won });
    }
  }
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
