// The turn contract every environment kind defines for the agent loop (docs/PROTOCOLS.md
// section 1, docs/ALGORITHMS.md section 1): how a turn's prompt is rendered, how a
// response becomes an action, what an invalid turn sends, and where skills come from.
// Each environment plugin (envs/<name>/plugin.ts) carries its own.

import type { ReasoningFormat } from '../tokenizer/thinking.ts';

export interface TurnHistoryEntry {
  /** What the agent saw before acting. */
  observation: string;
  /** The action string of that turn (never the reasoning around it). */
  action: string;
}

export interface TurnPromptInput {
  task: string;
  /** Every earlier turn of the episode, oldest first; the renderer shows the last K. */
  history: readonly TurnHistoryEntry[];
  observation: string;
  admissibleActions: readonly string[];
  /** Skill text for the privileged block at the start of the user message. */
  skills?: string;
  /** Where the answer's reasoning goes (the model's thinking mode, src/tokenizer/thinking.ts); default 'tags'. */
  reasoning?: ReasoningFormat;
}

/** Who reads a skills block: the policy's own prompt (Skill-GRPO) or a teacher prompt. */
export type SkillReader = 'policy' | 'teacher';

export interface ParsedTurn {
  /** What the environment receives: the turn's action (an invalid turn's too, where the reference acts on it), or the spec's no-op when it has none. */
  send: string;
  /** What later prompts show as this turn's action. */
  historyAction: string;
  valid: boolean;
}

export interface AgentSpec {
  /** The environment kind this spec drives. */
  readonly env: string;
  /** K: how many earlier (observation, action) pairs each prompt shows. */
  readonly historyLength: number;
  /** The loop ends an episode after this many turns even if the environment has not. */
  readonly maxTurns: number;
  /** What the environment gets on an invalid turn: a harmless action it answers without changing state. */
  readonly noop: string;
  /**
   * Strings that close an action (search's </search>, </answer>). With the rollout's
   * stopAfterAction they are the engine's stop strings and the loop cuts responses
   * with `cutResponse`; otherwise responses run to the end of the turn, as the
   * reference generates them, and are cut only where `cutsAfterAction` says so.
   */
  readonly actionStops?: readonly string[];
  renderPrompt(input: TurnPromptInput): string;
  /** The response up to the end of its action: the whole text, or (search) up to the first closing tag. */
  cutResponse(response: string): string;
  /**
   * The turn keeps only `cutResponse` of what was generated, even when generation ran
   * on past the action: the rest is neither trained nor recorded (Search-R1 drops what
   * follows its first </search>, else </answer>).
   */
  readonly cutsAfterAction?: boolean;
  /** `response` with what the prompt opened in front (a thinking template's '<think>\n'); `reasoning` as the prompt asked (default 'tags'). */
  parse(response: string, reasoning?: ReasoningFormat): ParsedTurn;
  /**
   * The skills block text for one turn, routed as the reference routes skill cards
   * (docs/ALGORITHMS.md section 2): by the task type or by keywords over `prompt` (the
   * turn's prompt without skills), depending on the environment and on who reads it,
   * the policy (Skill-GRPO) or the teacher. The general card when nothing matches.
   */
  skills(taskType: string, prompt: string, reader: SkillReader): string;
  /** A response in this environment's answer format that carries `action`, with `thought` as its reasoning where `reasoning` has a place for it (default 'tags'). */
  formatResponse(thought: string, action: string, reasoning?: ReasoningFormat): string;
}
