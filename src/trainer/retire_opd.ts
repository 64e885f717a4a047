// RetireOPD (no public code; this project's design, ALGORITHMS.md section 3): stage 1
// trains a skill-conditioned teacher with Skill-GRPO; stage 2 trains a skill-free
// student with GRPO plus an SDAR-form distillation term from the frozen stage-1
// weights scoring with the skills block. The term retires (coefficient 0, no more
// teacher passes) once the student-teacher gap has stopped shrinking for `window`
// validations and the student's validation success reaches `fraction` of the
// teacher's. The gap is the mean |lT − lold| over an iteration's response tokens,
// averaged over the iterations since the previous validation.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import { findLatestCheckpoint, loadCheckpoint, restoreModel } from './checkpoint.ts';
import type { TrainConfig } from './config_schema.ts';
import { runDir } from './config.ts';

export interface RetireState {
  /** The frozen teacher's validation success with skills (measured once at the start of stage 2). */
  teacherSuccess: number | null;
  /** The gap at each validation so far. */
  gaps: number[];
  /** Gaps of the iterations since the last validation. */
  pendingGaps: number[];
  /** The iteration after which the distillation retired, or null. */
  retiredAt: number | null;
}

export function recordRetirementGap(state: RetireState, absGap: number): void {
  if (Number.isFinite(absGap)) state.pendingGaps.push(absGap);
}

/** At a validation: folds the pending gaps into the history and says whether the distillation retires now. */
export function retirementDue(state: RetireState, studentSuccess: number, cfg: TrainConfig['algorithm']['retire_opd'], iteration: number): boolean {
  if (state.pendingGaps.length) {
    state.gaps.push(state.pendingGaps.reduce((a, b) => a + b, 0) / state.pendingGaps.length);
    state.pendingGaps = [];
  }
  if (state.retiredAt !== null || state.teacherSuccess === null) return false;
  const n = state.gaps.length;
  if (n <= cfg.window) return false;
  // Stopped shrinking: none of the last `window` gaps is below the best before them.
  const bestBefore = Math.min(...state.gaps.slice(0, n - cfg.window));
  const stalled = state.gaps.slice(n - cfg.window).every((g) => g >= bestBefore);
  if (!stalled || studentSuccess < cfg.fraction * state.teacherSuccess) return false;
  state.retiredAt = iteration;
  return true;
}

/** Loads the frozen teacher: a Hugging Face directory, or a training checkpoint directory (full or LoRA). */
export function loadTeacher(where: string): CausalLM {
  if (fs.existsSync(path.join(where, 'config.json'))) return loadCausalLM(where, { trainable: false });
  return restoreModel(loadCheckpoint(where), { trainable: false });
}

/** True when `where` looks like something loadTeacher can read. */
export function isTeacherDir(where: string): boolean {
  return fs.existsSync(path.join(where, 'config.json')) || fs.existsSync(path.join(where, 'checkpoint.json'));
}

/** Stage 1's configuration: Skill-GRPO in a sibling run directory. */
export function stageOneConfig(cfg: TrainConfig): TrainConfig {
  return {
    ...cfg,
    method: 'skill_grpo',
    iterations: cfg.algorithm.retire_opd.stage1Iterations ?? cfg.iterations,
    output: { ...cfg.output, runName: `${cfg.output.runName}-stage1` },
  };
}

/** Stage 2's configuration: the student, distilled from stage 1's last checkpoint. */
export function stageTwoConfig(cfg: TrainConfig, stageOneRun: string): TrainConfig {
  const teacher = findLatestCheckpoint(path.join(stageOneRun, 'checkpoints'));
  if (!teacher) throw new Error(`retire_opd: stage 1 left no checkpoint under ${path.join(stageOneRun, 'checkpoints')}`);
  return { ...cfg, algorithm: { ...cfg.algorithm, retire_opd: { ...cfg.algorithm.retire_opd, teacherPath: teacher } } };
}

/** Whether stage 1's run already reached its last iteration (a resumed RetireOPD run skips it). */
export function stageOneDone(stageOne: TrainConfig): boolean {
  const latest = findLatestCheckpoint(path.join(runDir(stageOne), 'checkpoints'));
  return latest !== null && loadCheckpoint(latest).iteration >= stageOne.iterations;
}
