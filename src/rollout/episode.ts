// One episode of the agent loop: a session of one task, its history, and the turns it
// has played. Each round the loop asks every live episode for its next prompt
// (`prepare`), generates all responses in one engine call, and hands each episode its
// response (`act`), which parses the action, steps the environment and records the
// turn as a training sample. Environment failures end only the episode that met them.

import type { AgentSpec, TurnHistoryEntry, TurnPromptInput } from '../envs/agent_spec.ts';
import { skillBlock, type SkillsPlacement } from '../envs/skills_block.ts';
import { SessionLostError } from '../envs/http_json.ts';
import type { EnvInfo, EnvSession, Environment, TaskSplit } from '../envs/types.ts';
import type { ThinkingFormat } from '../tokenizer/thinking.ts';
import type { ChatMessage, Tokenizer } from '../tokenizer/tokenizer.ts';
import { followUpMessage, turnChat, withFirstMessage, type PromptHistory } from './conversation.ts';
import type { GenerationRequest, GenerationResult, SamplingParams } from '../engines/engine.ts';
import type { StepSample, TrajectoryRecord } from './sample.ts';
import { cutTokens, encodeChatPrompt, encodePrefixedTurnPrompt, encodeTurnPrompt, type TurnPromptIds } from './tokenize_turn.ts';

export interface RolloutTask {
  split: TaskSplit;
  /** The environment's seed for the task (a server that numbers its tasks: the task's index). */
  seed: number;
  /** An explicit task (environment-specific JSON) instead of the one the seed draws. */
  task?: unknown;
}

/**
 * Where the skills block goes: nowhere, the policy's own prompt (Skill-GRPO), a teacher
 * prompt next to it, or the teacher's prompt in place of the policy's (the model
 * generating as the teacher sees the task, to measure what the teacher knows).
 */
export type SkillsMode = 'none' | 'policy' | 'teacher' | 'as_teacher';

/** How often an episode may start over because a server lost it before it fails. */
const MAX_RESTARTS = 3;

/** A turn's sample before the episode's return is known. */
export type PendingSample = Omit<StepSample, 'score' | 'episodeReturn' | 'won'>;

/** What every episode of a rollout shares. */
export interface EpisodeContext {
  env: Environment;
  spec: AgentSpec;
  tokenizer: Tokenizer;
  /** How the template frames reasoning under the run's thinking mode: what enable_thinking the prompts pass, what the environment prompts ask for. */
  thinking: ThinkingFormat;
  withSkills: SkillsMode;
  teacherSkillsPlacement: SkillsPlacement;
  /** Sampling of every request; `seed` set makes each request's seed derive from it. */
  sampling: Omit<SamplingParams, 'maxTokens'>;
  maxPromptTokens: number;
  maxResponseTokens: number;
  maxTurns: number;
  stopAfterAction: boolean;
  /** How a prompt carries the episode so far: a window of recent turns, or the whole chat. */
  history: PromptHistory;
  envTimeoutMs: number;
  /** Engine cost counters the episodes add to. */
  cost: { promptTokens: number; truncatedPrompts: number; teacherPromptTokens: number; truncatedTeacherPrompts: number };
}

/** A turn's user message, its templated prompt, and the teacher's when there is one. */
interface TurnPrompts {
  prompt: string;
  encoded: TurnPromptIds;
  teacher: TurnPromptIds | null;
}

/** A turn ready for the engine. */
export interface PreparedTurn {
  prompt: string;
  promptIds: number[];
  promptTruncated: boolean;
  teacherPromptIds: number[] | undefined;
  request: GenerationRequest;
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
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

/**
 * A response as an assistant message: the answer as the model wrote it (with the think
 * block its generation prompt opened), special tokens included, less a final
 * end-of-sequence token, which the chat template writes itself.
 */
function assistantText(tokenizer: Tokenizer, opened: string, ids: readonly number[]): string {
  const end = ids.length > 0 && tokenizer.eosTokenIds.includes(ids[ids.length - 1]) ? ids.length - 1 : ids.length;
  return opened + tokenizer.decode(ids.slice(0, end), { skipSpecialTokens: false });
}

export class Episode {
  private session: EnvSession | null = null;
  private task = '';
  private taskType = 'unknown';
  private observation = '';
  private admissible: string[] = [];
  private info: EnvInfo | null = null;
  private readonly history: TurnHistoryEntry[] = [];
  /** With rollout.history conversation: the messages of the turns played, as the policy read and wrote them. */
  private readonly chat: ChatMessage[] = [];
  /** With a conversation and skills: the block routed at the first turn, and the first user message carrying it. */
  private chatSkills: { text: string; firstMessage: string } | undefined;
  readonly turns: TrajectoryRecord['turns'] = [];
  readonly samples: PendingSample[] = [];
  episodeReturn = 0;
  won = false;
  private envScore: number | undefined;
  private done = false;
  private truncated = false;
  /** Why the episode started over from its first turn, each time (a server lost it). */
  private readonly restarts: string[] = [];
  private server: string | undefined;
  private version: number | undefined;
  private envServer: string | undefined;
  error: string | undefined;

  constructor(
    /** Position in the rollout (task-major, G per task). */
    readonly index: number,
    readonly groupId: string,
    readonly trajectoryId: string,
    readonly request: RolloutTask,
  ) {}

  /** Over: won, lost, cut at the turn cap, or failed. */
  get finished(): boolean {
    return this.done || this.error !== undefined;
  }

  /** Creates and resets the session; a failure becomes the episode's error. */
  async open(ctx: EpisodeContext): Promise<void> {
    const { split, seed, task } = this.request;
    const envName = ctx.env.name;
    const creating = attempt(() => ctx.env.create({ split, seed, task }));
    try {
      this.session = await withTimeout(creating, ctx.envTimeoutMs, `${envName} create`);
      const first = await withTimeout(attempt(() => this.session!.reset()), ctx.envTimeoutMs, `${envName} reset`);
      this.task = this.session.task;
      this.envServer = this.session.server;
      this.taskType = first.info.task_type;
      this.observation = first.observation;
      this.admissible = first.admissible_actions;
      this.info = first.info;
    } catch (e) {
      this.error = `starting the episode (split ${split}, seed ${seed}): ${errorMessage(e)}`;
      // A session that arrives after its deadline would otherwise live on the server until reclaimed.
      if (this.session === null) void creating.then((s) => s.close()).catch(() => undefined);
      else await this.close(ctx);
    }
  }

  /** The next turn's prompt (and teacher prompt) as a generation request. */
  prepare(ctx: EpisodeContext): PreparedTurn {
    const turn = this.turns.length;
    const input = { task: this.task, history: this.history, observation: this.observation, admissibleActions: this.admissible, reasoning: ctx.thinking.reasoning };
    const { prompt, encoded, teacher } = ctx.history === 'conversation' ? this.conversationPrompts(ctx, input) : this.windowPrompts(ctx, input);
    ctx.cost.promptTokens += encoded.ids.length;
    if (encoded.truncated) ctx.cost.truncatedPrompts++;
    let teacherPromptIds: number[] | undefined;
    if (ctx.withSkills === 'teacher') {
      teacherPromptIds = teacher!.ids;
      ctx.cost.teacherPromptTokens += teacher!.ids.length;
      if (teacher!.truncated) ctx.cost.truncatedTeacherPrompts++;
    }
    const stop = [...new Set([...(ctx.stopAfterAction ? (ctx.spec.actionStops ?? []) : []), ...(ctx.sampling.stop ?? [])])];
    const params: SamplingParams = { ...ctx.sampling, maxTokens: ctx.maxResponseTokens, stop };
    if (ctx.sampling.seed !== undefined) params.seed = requestSeed(ctx.sampling.seed, this.index, turn);
    const context = {
      env: ctx.spec.env,
      trajectoryId: this.trajectoryId,
      turn,
      task: this.task,
      taskType: this.taskType,
      observation: this.observation,
      admissibleActions: this.admissible,
      info: this.info!,
    };
    return { prompt, promptIds: encoded.ids, promptTruncated: encoded.truncated, teacherPromptIds, request: { promptIds: encoded.ids, params, context } };
  }

  /** The environment's prompt rendered fresh with its recent turns, one user message (and the teacher's). */
  private windowPrompts(ctx: EpisodeContext, input: TurnPromptInput): TurnPrompts {
    const enableThinking = ctx.thinking.enableThinking;
    const plain = ctx.spec.renderPrompt(input);
    // The cards are chosen each turn, as the reference routes them over the turn's prompt.
    const reader = ctx.withSkills === 'policy' ? 'policy' : 'teacher';
    const skills = ctx.withSkills === 'none' ? undefined : ctx.spec.skills(this.taskType, plain, reader);
    const prompt = ctx.withSkills === 'policy' ? ctx.spec.renderPrompt({ ...input, skills }) : plain;
    const teacher = ctx.withSkills === 'teacher' || ctx.withSkills === 'as_teacher'
      ? (ctx.teacherSkillsPlacement === 'before_template'
        ? encodePrefixedTurnPrompt(ctx.tokenizer, skillBlock(skills!.trim()), prompt, ctx.maxPromptTokens, enableThinking)
        : encodeTurnPrompt(ctx.tokenizer, ctx.spec.renderPrompt({ ...input, skills }), ctx.maxPromptTokens, enableThinking))
      : null;
    const encoded = ctx.withSkills === 'as_teacher' ? teacher! : encodeTurnPrompt(ctx.tokenizer, prompt, ctx.maxPromptTokens, enableThinking);
    return { prompt, encoded, teacher };
  }

  /**
   * The episode's chat so far and this turn's user message (conversation.ts). The cards
   * are routed once, over the first message, so the skills block is the same on every
   * turn and the teacher's chat only grows as well.
   */
  private conversationPrompts(ctx: EpisodeContext, input: TurnPromptInput): TurnPrompts {
    const enableThinking = ctx.thinking.enableThinking;
    const first = this.chat.length === 0;
    const plain = first ? ctx.spec.renderPrompt(input) : followUpMessage(this.observation, this.admissible);
    if (first && ctx.withSkills !== 'none') {
      const skills = ctx.spec.skills(this.taskType, plain, ctx.withSkills === 'policy' ? 'policy' : 'teacher');
      this.chatSkills = { text: skills, firstMessage: ctx.spec.renderPrompt({ ...input, skills }) };
    }
    const prompt = first && ctx.withSkills === 'policy' ? this.chatSkills!.firstMessage : plain;
    const chat = turnChat(this.chat, prompt);
    const teacher = ctx.withSkills === 'teacher' || ctx.withSkills === 'as_teacher'
      ? (ctx.teacherSkillsPlacement === 'before_template'
        ? encodeChatPrompt(ctx.tokenizer, skillBlock(this.chatSkills!.text.trim()), chat, ctx.maxPromptTokens, enableThinking)
        : encodeChatPrompt(ctx.tokenizer, '', withFirstMessage(chat, this.chatSkills!.firstMessage), ctx.maxPromptTokens, enableThinking))
      : null;
    const encoded = ctx.withSkills === 'as_teacher' ? teacher! : encodeChatPrompt(ctx.tokenizer, '', chat, ctx.maxPromptTokens, enableThinking);
    return { prompt, encoded, teacher };
  }

  /** Plays the response: parses its action, steps the environment, records the turn and its sample. */
  async act(ctx: EpisodeContext, turn: PreparedTurn, result: GenerationResult): Promise<void> {
    let { tokenIds, logprobs, text } = result;
    const cut = ctx.stopAfterAction || ctx.spec.cutsAfterAction ? ctx.spec.cutResponse(text) : text;
    if (cut !== text) {
      const kept = cutTokens(ctx.tokenizer, tokenIds, cut);
      tokenIds = tokenIds.slice(0, kept.keep);
      logprobs = logprobs.slice(0, kept.keep);
      text = kept.text;
    }
    // A think block the generation prompt opened is part of the answer the parser reads.
    const parsed = ctx.spec.parse(ctx.thinking.opened + text, ctx.thinking.reasoning);
    const index = this.turns.length;
    let step;
    try {
      step = await withTimeout(attempt(() => this.session!.step(parsed.send)), ctx.envTimeoutMs, `${ctx.env.name} step`);
    } catch (e) {
      if (e instanceof SessionLostError && this.restarts.length < MAX_RESTARTS) return this.restart(ctx, `turn ${index}: ${e.message}`);
      this.error = `turn ${index}: ${errorMessage(e)}`;
      return;
    }
    if (index === 0) {
      this.server = result.server;
      this.version = result.version;
    }
    this.turns.push({
      prompt: turn.prompt,
      response: text,
      action: parsed.send,
      valid: parsed.valid,
      observation: step.observation,
      reward: step.reward,
      promptTokens: turn.promptIds.length,
      responseTokens: tokenIds.length,
      responseIds: tokenIds,
      promptTruncated: turn.promptTruncated,
    });
    const sample: PendingSample = {
      groupId: this.groupId,
      trajectoryId: this.trajectoryId,
      turn: index,
      taskType: this.taskType,
      promptIds: turn.promptIds,
      responseIds: tokenIds,
      responseLogprobs: logprobs,
      valid: parsed.valid,
      state: this.observation,
    };
    if (turn.teacherPromptIds !== undefined) sample.teacherPromptIds = turn.teacherPromptIds;
    this.samples.push(sample);
    this.history.push({ observation: this.observation, action: parsed.historyAction });
    if (ctx.history === 'conversation') this.chat.push({ role: 'user', content: turn.prompt }, { role: 'assistant', content: assistantText(ctx.tokenizer, ctx.thinking.opened, tokenIds) });
    this.observation = step.observation;
    this.admissible = step.admissible_actions;
    this.info = step.info;
    this.episodeReturn += step.reward;
    this.won = step.info.won;
    if (typeof step.info.score === 'number') this.envScore = step.info.score;
    if (step.done) this.done = true;
    else if (this.turns.length >= ctx.maxTurns) this.done = this.truncated = true;
  }

  /**
   * Starts the episode over from turn 0 in a new session: a server lost it (an
   * environment server's session, or the inference server running it), and a return
   * half played there cannot be scored. The same task and sampling seeds play it again;
   * after MAX_RESTARTS the episode fails instead.
   */
  async restart(ctx: EpisodeContext, why: string): Promise<void> {
    if (this.restarts.length >= MAX_RESTARTS) {
      this.error = `lost ${this.restarts.length + 1} times, the last at ${why}`;
      await this.close(ctx);
      return;
    }
    this.restarts.push(why);
    await this.close(ctx);
    this.turns.length = 0;
    this.samples.length = 0;
    this.history.length = 0;
    this.chat.length = 0;
    this.chatSkills = undefined;
    this.episodeReturn = 0;
    this.won = false;
    this.envScore = undefined;
    this.server = this.version = undefined;
    this.done = this.truncated = false;
    await this.open(ctx);
  }

  /** Closes the session; the outcome is already known, so a session that will not close is the server's to reclaim. */
  async close(ctx: EpisodeContext): Promise<void> {
    const session = this.session;
    this.session = null;
    if (session === null) return;
    await withTimeout(attempt(() => session.close()), ctx.envTimeoutMs, 'close').catch(() => undefined);
  }

  record(thinking: ThinkingFormat): TrajectoryRecord {
    const record: TrajectoryRecord = {
      trajectoryId: this.trajectoryId,
      groupId: this.groupId,
      task: this.task,
      taskType: this.taskType,
      split: this.request.split,
      seed: this.request.seed,
      won: this.error === undefined && this.won,
      episodeReturn: this.episodeReturn,
      turns: this.turns,
      truncated: this.truncated,
      thinking: thinking.mode,
    };
    if (this.envScore !== undefined) record.envScore = this.envScore;
    if (this.chat.length > 0) record.history = 'conversation';
    if (this.restarts.length) record.restartedBecause = this.restarts.join('; ');
    if (this.server !== undefined) record.server = this.server;
    if (this.version !== undefined) record.policyVersion = this.version;
    if (this.envServer !== undefined) record.envServer = this.envServer;
    if (this.error !== undefined) record.error = this.error;
    return record;
  }

  /** The episode's samples, scored: its return less `invalidPenalty` on each turn that was not a well-formed action. */
  scoredSamples(invalidPenalty: number): StepSample[] {
    return this.samples.map((s) => ({ ...s, score: this.episodeReturn - (s.valid ? 0 : invalidPenalty), episodeReturn: this.episodeReturn, won: this.won }));
  }
}
