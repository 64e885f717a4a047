// Step-wise training samples (docs/ALGORITHMS.md section 1): every environment turn of
// every trajectory becomes one sample, its prompt and its response; the trainer packs
// them into sequences (turn_sequences.ts).

import type { ThinkingMode } from '../tokenizer/thinking.ts';

export interface StepSample {
  /** Task group: the G runs of one task share it. */
  groupId: string;
  trajectoryId: string;
  /** 0-based turn index within the episode. */
  turn: number;
  taskType: string;
  promptIds: number[];
  responseIds: number[];
  /** Log-probs of responseIds under the rollout policy (lold). */
  responseLogprobs: number[];
  /** Whether this turn's response parsed as a well-formed action. */
  valid: boolean;
  /** R(tau) - c_inv * [invalid]: the episode return, penalised for this turn's invalid action. */
  score: number;
  /** Episode return R(tau) of the trajectory this turn belongs to. */
  episodeReturn: number;
  won: boolean;
  /** The observation this turn acted on (GiGPO groups turns of a task that saw the same one). */
  state: string;
  /** Prompt of this turn with the skills block (teacher passes), when the method needs it. */
  teacherPromptIds?: number[];
}

export interface TrajectoryRecord {
  trajectoryId: string;
  groupId: string;
  task: string;
  taskType: string;
  split: string;
  seed: number;
  won: boolean;
  episodeReturn: number;
  /** Native environment score where it has one (shop). */
  envScore?: number;
  /** Present when the episode was one chat (rollout.history conversation): each turn's prompt is then its new user message only. */
  history?: 'conversation';
  turns: {
    /** The user message of this turn (before the chat template and any truncation). */
    prompt: string;
    response: string;
    /** What the environment received: the parsed action, or the no-op when the turn was invalid. */
    action: string;
    valid: boolean;
    /** The environment's answer to `action`. */
    observation: string;
    reward: number;
    /** Prompt length after left-truncation to the prompt budget. */
    promptTokens: number;
    responseTokens: number;
    /**
     * The response's ids as the engine sampled them (an end token only when one was
     * sampled), what SFT on a rollout log trains on. Logs written before ids were
     * recorded lack it.
     */
    responseIds?: number[];
    /** The templated prompt was longer than the budget and lost its start. */
    promptTruncated: boolean;
  }[];
  /** The loop stopped the episode at its turn cap before the environment ended it. */
  truncated: boolean;
  /** The thinking mode the prompts were rendered with (model.thinking); logs written before it was recorded lack it. */
  thinking?: ThinkingMode;
  /** Why the episode started over from its first turn (an environment or inference server lost it), each time it did. */
  restartedBecause?: string;
  /** The inference server that ran the episode, when the engine has several. */
  server?: string;
  /** The version of the weights (updates they had had) that generated it, when the engine serves a run's versions. */
  policyVersion?: number;
  /** The environment server whose session played it, when there are several. */
  envServer?: string;
  /** Why the trajectory failed (environment server error or timeout); failed trajectories yield no samples. */
  error?: string;
}
