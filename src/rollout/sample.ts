// Step-wise training samples (shared design ALGORITHMS.md section 1): every
// environment turn of every trajectory becomes one sample with a fresh prompt.

export interface StepSample {
  /** Task group: the G runs of one task share it. */
  groupId: string;
  trajectoryId: string;
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
  turns: {
    prompt: string;
    response: string;
    action: string;
    valid: boolean;
    observation: string;
    reward: number;
    promptTokens: number;
    responseTokens: number;
  }[];
  /** Why the trajectory ended early (environment error, turn cap). */
  error?: string;
}
