// The token sequences an iteration scores and trains (docs/ALGORITHMS.md section 1.4).
// A turn sample is its prompt and its response. Where the next turn's prompt begins
// with exactly those ids (an append-only prompt: a chat that only grows), the two turns
// are one sequence: in a causal model every token's log-prob depends only on the
// tokens before it, so the earlier response scores the same inside the longer
// sequence, and its prompt is read once instead of once per turn. Whether prompts are
// append-only is read from the ids themselves, turn by turn, so a template that
// re-renders the history (a window of recent turns, Qwen3 dropping earlier reasoning,
// a left-truncated prompt) starts a new sequence there: per-turn samples at worst.

import type { StepSample } from './sample.ts';

/** One turn's response inside a sequence. */
export interface SequenceTurn {
  /** Index of the turn's sample in the sample list. */
  sample: number;
  /** Position of its first response token in `ids`. */
  start: number;
  /** Its response tokens. */
  length: number;
}

/** Consecutive turns of one trajectory scored as one token sequence. */
export interface TurnSequence {
  /** The last turn's prompt and response, which hold every earlier turn's. */
  ids: number[];
  /** The turns it trains, in turn order. */
  turns: SequenceTurn[];
  /** Its response tokens, over all its turns. */
  responseTokens: number;
}

/** Which prompt a pass reads: the policy's own, or the teacher's (skills block in front). */
export type PromptOf = (sample: StepSample, index: number) => readonly number[];

const policyPrompt: PromptOf = (s) => s.promptIds;

/** True when `ids` starts with `head` followed by `tail`. */
function startsWith(ids: readonly number[], head: readonly number[], tail: readonly number[]): boolean {
  if (ids.length < head.length + tail.length) return false;
  for (let i = 0; i < head.length; i++) if (ids[i] !== head[i]) return false;
  for (let i = 0; i < tail.length; i++) if (ids[head.length + i] !== tail[i]) return false;
  return true;
}

/**
 * The samples (a rollout's, in trajectory then turn order) as sequences. With `merge`
 * a turn joins the sequence of the turn before it in its trajectory when its prompt
 * starts with that turn's prompt and response; without it, or where the ids differ,
 * it starts a sequence of its own.
 */
export function turnSequences(samples: readonly StepSample[], opts: { merge: boolean; prompt?: PromptOf }): TurnSequence[] {
  const promptOf = opts.prompt ?? policyPrompt;
  const out: TurnSequence[] = [];
  let open: { seq: TurnSequence; sample: StepSample; prompt: readonly number[] } | null = null;
  samples.forEach((s, i) => {
    const prompt = promptOf(s, i);
    const turn = { sample: i, start: prompt.length, length: s.responseIds.length };
    const prev = open;
    const follows = prev !== null && prev.sample.trajectoryId === s.trajectoryId && prev.sample.turn + 1 === s.turn;
    if (opts.merge && follows && startsWith(prompt, prev.prompt, prev.sample.responseIds)) {
      prev.seq.ids = [...prompt, ...s.responseIds];
      prev.seq.turns.push(turn);
      prev.seq.responseTokens += turn.length;
      open = { seq: prev.seq, sample: s, prompt };
      return;
    }
    const seq: TurnSequence = { ids: [...prompt, ...s.responseIds], turns: [turn], responseTokens: turn.length };
    out.push(seq);
    open = { seq, sample: s, prompt };
  });
  return out;
}

/** How an iteration's episodes were scored: tokens read and trained, episodes of several turns merged or not. */
export interface SequenceStats {
  sequences: number;
  /** Tokens of the sequences that are not trained response tokens (prompts, end-of-turn and observation tokens). */
  scoredPromptTokens: number;
  responseTokens: number;
  /** Episodes of two or more turns scored as one sequence. */
  mergedEpisodes: number;
  /** Episodes of two or more turns scored as more than one sequence (a prompt that re-renders, or merging off). */
  splitEpisodes: number;
}

export function sequenceStats(samples: readonly StepSample[], sequences: readonly TurnSequence[]): SequenceStats {
  const pieces = new Map<string, number>();
  const turns = new Map<string, number>();
  for (const s of samples) turns.set(s.trajectoryId, (turns.get(s.trajectoryId) ?? 0) + 1);
  // A sequence without response tokens is never scored.
  let scoredPromptTokens = 0;
  let responseTokens = 0;
  for (const q of sequences) {
    const id = samples[q.turns[0].sample].trajectoryId;
    pieces.set(id, (pieces.get(id) ?? 0) + 1);
    if (q.responseTokens === 0) continue;
    scoredPromptTokens += q.ids.length - q.responseTokens;
    responseTokens += q.responseTokens;
  }
  let mergedEpisodes = 0;
  let splitEpisodes = 0;
  for (const [id, n] of turns) {
    if (n < 2) continue;
    if (pieces.get(id) === 1) mergedEpisodes++;
    else splitEpisodes++;
  }
  return { sequences: sequences.length, scoredPromptTokens, responseTokens, mergedEpisodes, splitEpisodes };
}
