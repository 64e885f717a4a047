// The teacher pass of the self-distillation methods (docs/ALGORITHMS.md section 2):
// the log-prob of each sampled response token after the turn's prompt with the
// skills block, computed once per iteration before the update. The teacher is the
// policy's current weights, a frozen model (RetireOPD's stage-1 checkpoint), or a
// server's scoring API (vLLM prompt_logprobs), which only ever has to return the
// sampled tokens' log-probs.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import type { Engine } from '../engines/engine.ts';
import type { StepSample } from '../rollout/sample.ts';
import { loadCheckpoint, restoreModel } from '../checkpoint/checkpoint.ts';
import { turnSequences, type PromptOf, type TurnSequence } from '../rollout/turn_sequences.ts';
import { responseLogprobs, sharedPrefixMicroBatches } from './update.ts';

export type TeacherSource =
  | { kind: 'model'; model: CausalLM }
  | { kind: 'engine'; engine: Engine; model?: string };

/** A sample's teacher prompt; a sample rolled out without one is refused, by name. */
export const teacherPrompt: PromptOf = (s, i) => {
  if (!s.teacherPromptIds) throw new Error(`teacher pass: sample ${i} (${s.trajectoryId} turn ${s.turn}) has no teacher prompt; roll out with withSkills 'teacher'`);
  return s.teacherPromptIds;
};

/**
 * The teacher's sequences: the samples' teacher prompts with their responses, the
 * turns of an episode merged where its teacher prompts only grow (`merge`), as the
 * policy's are (rollout/turn_sequences.ts).
 */
export function teacherSequences(samples: readonly StepSample[], merge: boolean): TurnSequence[] {
  return turnSequences(samples, { merge, prompt: teacherPrompt });
}

export interface TeacherScores {
  /** lT of each sample's response tokens. */
  logprobs: Float32Array[];
  /** Prompt tokens a model teacher did not run again: its sequences' shared skills blocks (trainer/update.ts sharedPrefixMicroBatches). */
  sharedTokens: number;
}

/**
 * lT of every sample's response tokens. A model teacher runs each prefix its
 * sequences share once (the skills block of the turns routed to the same cards). An
 * engine gets each sequence as its first turn's prompt and the rest as the completion,
 * and the turns' responses are read out of that: a frozen teacher's local engine
 * shares prefixes the same way (scoring/score.ts scoreTails), a scoring server as its
 * prefix cache does (vLLM's prompt_logprobs score the whole of it).
 */
export async function teacherLogprobs(source: TeacherSource, samples: readonly StepSample[], sequences: readonly TurnSequence[], microBatchTokens: number, temperature = 1): Promise<TeacherScores> {
  if (source.kind === 'model') {
    const { batches, sharedTokens } = sharedPrefixMicroBatches(sequences, microBatchTokens);
    return { logprobs: await responseLogprobs(source.model, samples, batches, temperature), sharedTokens };
  }
  const scored = sequences.filter((q) => q.responseTokens > 0);
  const requests = scored.map((q) => ({ promptIds: q.ids.slice(0, q.turns[0].start), completionIds: q.ids.slice(q.turns[0].start) }));
  const rows = await source.engine.score(requests, { model: source.model, temperature });
  const out = samples.map(() => new Float32Array(0));
  rows.forEach((row, k) => {
    const q = scored[k];
    const what = `sequence of ${q.turns.length === 1 ? `sample ${q.turns[0].sample}` : `samples ${q.turns[0].sample}-${q.turns[q.turns.length - 1].sample}`}`;
    if (row.length !== requests[k].completionIds.length) {
      throw new Error(`teacher server: ${row.length} log-probs for the ${requests[k].completionIds.length} completion tokens of the ${what}`);
    }
    const values = Float32Array.from(row);
    const bad = values.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new Error(`teacher server: log-prob ${values[bad]} at completion token ${bad} of the ${what}`);
    const first = q.turns[0].start;
    for (const t of q.turns) out[t.sample] = values.slice(t.start - first, t.start - first + t.length);
  });
  return { logprobs: out, sharedTokens: 0 };
}

/** Loads a frozen teacher: a Hugging Face directory, or a training checkpoint directory (full or LoRA). */
export function loadTeacher(where: string): CausalLM {
  if (storage().exists(path.join(where, 'config.json'))) return loadCausalLM(where, { trainable: false });
  return restoreModel(loadCheckpoint(where), { trainable: false });
}

/** True when `where` looks like something loadTeacher can read. */
export function isTeacherDir(where: string): boolean {
  return storage().exists(path.join(where, 'config.json')) || storage().exists(path.join(where, 'checkpoint.json'));
}
