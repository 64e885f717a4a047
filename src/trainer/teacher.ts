// The teacher pass of the self-distillation methods (docs/ALGORITHMS.md section 2):
// the log-prob of each sampled response token after the turn's prompt with the
// skills block, computed once per iteration before the update. The teacher is the
// policy's current weights, a frozen model (RetireOPD's stage-1 checkpoint), or a
// server's scoring API (vLLM prompt_logprobs), which only ever has to return the
// sampled tokens' log-probs.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import type { Engine } from '../rollout/engine.ts';
import type { StepSample } from '../rollout/sample.ts';
import { loadCheckpoint, restoreModel } from '../checkpoint/checkpoint.ts';
import { responseLogprobs, splitMicroBatches } from './update.ts';

export type TeacherSource =
  | { kind: 'model'; model: CausalLM }
  | { kind: 'engine'; engine: Engine; model?: string };

/** The samples with their teacher prompts in place of their own (the responses are the same tokens). */
export function teacherSamples(samples: readonly StepSample[]): StepSample[] {
  return samples.map((s, i) => {
    if (!s.teacherPromptIds) throw new Error(`teacher pass: sample ${i} (${s.trajectoryId} turn ${s.turn}) has no teacher prompt; roll out with withSkills 'teacher'`);
    return { ...s, promptIds: s.teacherPromptIds };
  });
}

export async function teacherLogprobs(source: TeacherSource, samples: readonly StepSample[], microBatchTokens: number, temperature = 1): Promise<Float32Array[]> {
  const scored = teacherSamples(samples);
  if (source.kind === 'model') {
    return responseLogprobs(source.model, scored, splitMicroBatches(scored, scored.map((_, i) => i), microBatchTokens), temperature);
  }
  const rows = await source.engine.score(scored.map((s) => ({ promptIds: s.promptIds, completionIds: s.responseIds })), { model: source.model, temperature });
  return rows.map((row, i) => {
    if (row.length !== scored[i].responseIds.length) {
      throw new Error(`teacher server: ${row.length} log-probs for sample ${i}'s ${scored[i].responseIds.length} response tokens`);
    }
    const out = Float32Array.from(row);
    const bad = out.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new Error(`teacher server: log-prob ${out[bad]} at token ${bad} of sample ${i}`);
    return out;
  });
}

/** Loads a frozen teacher: a Hugging Face directory, or a training checkpoint directory (full or LoRA). */
export function loadTeacher(where: string): CausalLM {
  if (fs.existsSync(path.join(where, 'config.json'))) return loadCausalLM(where, { trainable: false });
  return restoreModel(loadCheckpoint(where), { trainable: false });
}

/** True when `where` looks like something loadTeacher can read. */
export function isTeacherDir(where: string): boolean {
  return fs.existsSync(path.join(where, 'config.json')) || fs.existsSync(path.join(where, 'checkpoint.json'));
}
