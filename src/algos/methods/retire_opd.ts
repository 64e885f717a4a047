// RetireOPD (no public code; this project's design, docs/ALGORITHMS.md section 3):
// stage 1 trains a skill-conditioned teacher with Skill-GRPO; stage 2 trains a
// skill-free student with GRPO plus an SDAR-form distillation term from the frozen
// stage-1 weights scoring with the skills block. The term retires (coefficient 0, no
// more teacher passes) once the student-teacher gap has stopped shrinking for
// `window` validations and the student's validation success reaches `fraction` of
// the teacher's. The gap is the mean |lT − lold| over an iteration's response tokens,
// averaged over the iterations since the previous validation.

import { z } from 'zod';
import { defineMethod } from '../method.ts';
import { nonNegNum, posInt } from '../options.ts';
import { grpoPlan } from '../plan.ts';
import { sdarAux } from './sdar.ts';

const options = z.strictObject({
  /** Validations without a shrinking student-teacher gap before the distillation retires. */
  window: posInt.default(3),
  /** Student success needed, as a fraction of the teacher's. */
  fraction: z.number().gt(0).max(1).default(0.9),
  /** Stage-1 teacher: a model or training-checkpoint directory; unset runs stage 1 (Skill-GRPO) first. */
  teacherPath: z.string().min(1).optional(),
  /** Stage 1's iterations when this run makes the teacher (default: the run's `iterations`). */
  stage1Iterations: posInt.optional(),
  beta: nonNegNum.default(5),
  coef: nonNegNum.default(0.01),
});

export type RetireOpdConfig = z.output<typeof options>;

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
export function retirementDue(state: RetireState, studentSuccess: number, cfg: Pick<RetireOpdConfig, 'window' | 'fraction'>, iteration: number): boolean {
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

export const retireOpd = defineMethod({
  name: 'retire_opd',
  summary: 'stage 1 Skill-GRPO teacher, stage 2 distillation from it that retires (this project\'s design)',
  options,
  interpreted: 'RetireOPD is this project\'s design (no public code): stage-1 Skill-GRPO teacher, stage-2 student with SDAR-form distillation that retires',
  loop: 'rl',
  // Without a teacher, the run is stage 1 (Skill-GRPO) into "<run>-stage1", then stage 2 distilling from its last checkpoint.
  stages: (o, iterations) => (o.teacherPath ? null : [
    { suffix: '-stage1', method: 'skill_grpo', iterations: o.stage1Iterations ?? iterations },
    { suffix: '', method: 'retire_opd', iterations, options: (teacher: string) => ({ ...o, teacherPath: teacher }) },
  ]),
  frozenTeacher: (o) => o.teacherPath ?? null,
  initialState: (): RetireState => ({ teacherSuccess: null, gaps: [], pendingGaps: [], retiredAt: null }),
  observe: (state, event, o) => {
    if (event.kind === 'teacher_validation') {
      state.teacherSuccess = event.success;
      return `retire_opd: the teacher (with skills) succeeds on ${(event.success * 100).toFixed(1)}% of the validation panel`;
    }
    if (event.kind === 'iteration') {
      const gap = event.metrics['teacher/abs_gap'];
      if (gap !== undefined) recordRetirementGap(state, gap);
      return null;
    }
    if (!retirementDue(state, event.success, o, event.iteration)) return null;
    return `retire_opd: distillation retired after iteration ${event.iteration} (gap stopped shrinking for ${o.window} validations; ` +
      `student ${(event.success * 100).toFixed(1)}% vs teacher ${((state.teacherSuccess ?? 0) * 100).toFixed(1)}%)`;
  },
  plan: ({ options: o, entropyCoef, state }) => {
    const retired = state.retiredAt !== null;
    const metrics: Record<string, number> = { 'retire/retired': retired ? 1 : 0 };
    if (state.teacherSuccess !== null) metrics['retire/teacher_success'] = state.teacherSuccess;
    if (retired) return { ...grpoPlan(entropyCoef), metrics };
    return { ...grpoPlan(entropyCoef), skills: 'teacher', teacher: true, aux: sdarAux(o.beta, o.coef), metrics };
  },
});
