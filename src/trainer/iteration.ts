// One training iteration of any method: roll out groups, score turns, GRPO
// advantages, form the sequences every pass packs (an episode whose prompts only grow
// is one; rollout/turn_sequences.ts), recompute old log-probs with the current weights
// (as verl does, so batching cannot skew the ratio; those of the first mini-batch come
// from its own forward in the update, as TRL's do; every log-prob of the iteration,
// old, reference, teacher and current, is at the rollout temperature, as verl computes
// them), the teacher pass when the method has one (once, before the update, so lT
// stays fixed across mini-batches), reference log-probs from the frozen model, the
// method's advantage transform, then the mini-batched update with its auxiliary term.

import { groupAdvantages } from '../algos/advantage.ts';
import { bypassing, checkRolloutLogprobs, rolloutCorrectionMetrics } from '../algos/rollout_correction.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { runRollout, type RolloutOptions, type RolloutResult } from '../rollout/agent_loop.ts';
import type { StepSample } from '../rollout/sample.ts';
import { sequenceStats, turnSequences, type SequenceStats } from '../rollout/turn_sequences.ts';
import type { Metrics } from '../report/metrics.ts';
import type { IterationPlan } from '../algos/plan.ts';
import type { Phase } from '../report/progress.ts';
import type { PhaseMemory } from '../gpu/phase_memory.ts';
import { gpuCounts, phaseCountMetrics } from '../gpu/gpu_counts.ts';
import { runtime } from '../gpu/runtime.ts';
import { teacherLogprobs, teacherSequences, type TeacherSource } from './teacher.ts';
import { broadcastAdvantages, policyUpdate, responseLogprobs, sharedPrefixMicroBatches, updateMiniBatches, type UpdateContext, type UpdateMetrics } from './update.ts';

/** Where reference log-probs come from: a frozen copy, the LoRA model with its adapters off, or none (no KL). */
export type Reference = { kind: 'model'; model: CausalLM } | { kind: 'lora-base' } | { kind: 'none' };

/** The phases as metrics name them (time/<name>, memory/<name>_peak_gib). */
const PHASE_NAMES: Record<keyof IterationTimes, string> = { rollout: 'rollout', oldLogprobs: 'old_logprobs', teacher: 'teacher', reference: 'reference', update: 'update' };

export interface IterationTimes {
  rollout: number;
  oldLogprobs: number;
  teacher: number;
  reference: number;
  update: number;
}

export interface IterationResult {
  rollout: RolloutResult;
  update: UpdateMetrics | null;
  /** How the policy's passes (old, reference, update) packed the samples; null without samples. */
  sequences: SequenceStats | null;
  /** The same for the teacher pass; null without one. */
  teacherSequences: SequenceStats | null;
  times: IterationTimes;
  /** Teacher-gap summary and the method's own statistics. */
  metrics: Metrics;
}

/** Runs fn with the model's LoRA branches detached (the frozen base is the reference). */
export async function withoutLora<T>(model: CausalLM, fn: () => Promise<T>): Promise<T> {
  const saved = new Map(model.lora);
  model.lora.clear();
  try {
    return await fn();
  } finally {
    for (const [k, v] of saved) model.lora.set(k, v);
  }
}

/** Mean of lT − lold and of its magnitude over all response tokens. */
export function teacherGap(teacher: readonly Float32Array[], old: readonly Float32Array[]): { gap: number; absGap: number } {
  let sum = 0;
  let abs = 0;
  let n = 0;
  teacher.forEach((t, i) => {
    for (let j = 0; j < t.length; j++) {
      const d = t[j] - old[i][j];
      sum += d;
      abs += Math.abs(d);
      n++;
    }
  });
  return { gap: n ? sum / n : 0, absGap: n ? abs / n : 0 };
}

export interface IterationInputs {
  rollout: RolloutOptions;
  update: UpdateContext;
  /** Score and train an episode's turns as one sequence where its prompts only grow (false: a sequence per turn). */
  mergeTurns: boolean;
  reference: Reference;
  plan: IterationPlan;
  /** The teacher when it is not the policy's current weights. */
  teacher?: TeacherSource;
  /** Called with the rollout before anything trains on it; throws to stop the run. */
  checkRollout?: (rollout: RolloutResult) => void;
  /** Shows the phases after the rollout (which reports its own) as they run; counts are samples. */
  phase?: (label: string, total: number) => Phase;
  /** Takes each phase's peak GPU memory and trims the pool between phases. */
  memory?: PhaseMemory;
}

export async function trainingIteration({ rollout: rolloutOpts, update, mergeTurns, reference, plan, teacher, checkRollout, phase, memory }: IterationInputs): Promise<IterationResult> {
  const now = () => performance.now() / 1000;
  const times: IterationTimes = { rollout: 0, oldLogprobs: 0, teacher: 0, reference: 0, update: 0 };
  let t = now();
  const rt = runtime();
  const metrics: Metrics = { ...plan.metrics };
  let counted = gpuCounts(rt);
  const lap = async (phase: keyof IterationTimes) => {
    Object.assign(metrics, phaseCountMetrics(rt, counted, PHASE_NAMES[phase]));
    await memory?.end(PHASE_NAMES[phase]);
    await rt.closeProfileSection(PHASE_NAMES[phase]);
    counted = gpuCounts(rt);
    const n = now();
    times[phase] = n - t;
    t = n;
  };
  const rollout = await runRollout({ ...rolloutOpts, withSkills: plan.skills });
  checkRollout?.(rollout);
  await lap('rollout');
  const samples = rollout.samples;
  checkRolloutLogprobs(samples, update.correction);
  if (!samples.length) return { rollout, update: null, sequences: null, teacherSequences: null, times, metrics };

  const advantages = groupAdvantages(samples);
  const sequences = turnSequences(samples, { merge: mergeTurns });
  const stats = sequenceStats(samples, sequences);
  Object.assign(metrics, sequenceMetrics(stats, ''));
  const minis = updateMiniBatches(update, sequences);
  // Bypassing, the engine's log-probs are the old policy's and nothing scores them again.
  // Otherwise the first mini-batch's come from its own forward in the update unless the
  // method's advantages read them before it (a teacher-gap transform).
  const bypass = bypassing(update.correction);
  const oldFromFirstStep = !bypass && !(plan.teacher && plan.transform);
  const scoredOld = bypass ? [] : oldFromFirstStep ? minis.slice(1).flat() : sequences.map((_, i) => i);
  const { batches, sharedTokens: oldShared } = sharedPrefixMicroBatches(sequences, update.microBatchTokens, { indices: scoredOld });
  metrics['tokens/old_shared_prefix'] = oldShared;
  metrics['tokens/old_scored_sequences'] = scoredOld.length;
  const during = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
    const shown = phase?.(label, samples.length);
    const value = await fn();
    shown?.finish();
    return value;
  };
  // The importance weight's denominator: computed as the update's forward computes, so the weight is 1 before the first step.
  const old = bypass
    ? samples.map((s) => Float32Array.from(s.responseLogprobs))
    : batches.length
      ? await during('old log-probs', () => responseLogprobs(update.model, samples, batches, update.temperature, { asTraining: true }))
      : samples.map(() => new Float32Array(0));
  const firstForward = bypass ? samples.map(() => new Float32Array(0)) : undefined;
  await lap('oldLogprobs');
  let teacherLp: Float32Array[] | null = null;
  let teacherStats: SequenceStats | null = null;
  if (plan.teacher) {
    const scored = teacherSequences(samples, mergeTurns);
    teacherStats = sequenceStats(samples, scored);
    Object.assign(metrics, sequenceMetrics(teacherStats, 'teacher_'));
    const scores = await during('teacher', () => teacherLogprobs(teacher ?? { kind: 'model', model: update.model }, samples, scored, update.microBatchTokens, update.temperature));
    teacherLp = scores.logprobs;
    metrics['tokens/teacher_shared_prefix'] = scores.sharedTokens;
    await lap('teacher');
  }
  let refLogprobs: Float32Array[] | null = null;
  if (update.loss.klCoef > 0 && reference.kind !== 'none') {
    // As the teacher's pass does, a prefix the sequences share runs once where that pays (a GRPO group's prompt, the skill cards a Skill-GRPO policy reads).
    const scoring = sharedPrefixMicroBatches(sequences, update.microBatchTokens);
    metrics['tokens/reference_shared_prefix'] = scoring.sharedTokens;
    refLogprobs = await during('reference', () => reference.kind === 'model'
      ? responseLogprobs(reference.model, samples, scoring.batches, update.temperature)
      : withoutLora(update.model, () => responseLogprobs(update.model, samples, scoring.batches, update.temperature)));
  }
  await lap('reference');
  let tokenAdvantages = broadcastAdvantages(samples, advantages);
  if (plan.transform) {
    const r = plan.transform({ samples, advantages, teacher: teacherLp, old });
    tokenAdvantages = r.advantages;
    Object.assign(metrics, r.metrics);
  }
  const shown = phase?.('update', samples.length);
  const result = await policyUpdate(
    { ...update, onProgress: shown && ((n, done, steps) => shown.update(n, `${done}/${steps} steps`)) },
    samples, sequences, minis, { advantages: tokenAdvantages, oldLogprobs: old, oldFromFirstStep, firstForward, refLogprobs, teacherLogprobs: teacherLp, aux: plan.aux },
  );
  shown?.finish(`${result.steps} steps`);
  Object.assign(metrics, result.aux);
  await lap('update');
  // Every old log-prob is known now, the first mini-batch's from the update's forward.
  // Bypassing, the trainer saw the rollout's tokens only in the first step's forward.
  const [seen, trainerLp] = firstForward ? firstStepSamples(samples, firstForward) : [samples, old];
  Object.assign(metrics, rolloutProbsDiff(seen, trainerLp), rolloutCorrectionMetrics(seen, trainerLp, update.correction));
  if (teacherLp) {
    const g = teacherGap(teacherLp, old);
    metrics['teacher/gap'] = g.gap;
    metrics['teacher/abs_gap'] = g.absGap;
  }
  return { rollout, update: result, sequences: stats, teacherSequences: teacherStats, times, metrics };
}

/** The samples the first step's forward scored (their entries filled), with those log-probs. */
function firstStepSamples(samples: readonly StepSample[], forward: readonly Float32Array[]): [StepSample[], Float32Array[]] {
  const kept = samples.flatMap((s, i) => (forward[i].length === s.responseIds.length && s.responseIds.length > 0 ? [i] : []));
  return [kept.map((i) => samples[i]), kept.map((i) => forward[i])];
}

/**
 * What one pass reads (tokens/<prefix>scored_prompt: every token of its sequences that
 * is not a trained response token; tokens/<prefix>response) and how episodes of two or
 * more turns were packed (episodes/<prefix>merged: one sequence; episodes/<prefix>per_turn:
 * more than one).
 */
function sequenceMetrics(s: SequenceStats, prefix: '' | 'teacher_'): Metrics {
  return {
    [`tokens/${prefix}scored_prompt`]: s.scoredPromptTokens,
    [`tokens/${prefix}response`]: s.responseTokens,
    [`episodes/${prefix}merged`]: s.mergedEpisodes,
    [`episodes/${prefix}per_turn`]: s.splitEpisodes,
  };
}

/**
 * How far the rollout engine's token probabilities are from the trainer's recomputation
 * with the same weights (verl's rollout_probs_diff): near 0 unless sampling and scoring
 * disagree (precision, padding, positions), which would bias every ratio.
 */
export function rolloutProbsDiff(samples: readonly StepSample[], old: readonly Float32Array[]): Metrics {
  let sum = 0;
  let max = 0;
  let n = 0;
  samples.forEach((s, i) => {
    s.responseLogprobs.forEach((lp, j) => {
      const d = Math.abs(Math.exp(lp) - Math.exp(old[i][j]));
      sum += d;
      max = Math.max(max, d);
      n++;
    });
  });
  return n === 0 ? {} : { 'rollout/probs_diff_mean': sum / n, 'rollout/probs_diff_max': max };
}

/** How a pass packed its episodes: one sequence each, one per turn, a mix, or none had two turns. */
type PackingMode = 'episode' | 'turn' | 'mixed' | 'single-turn';

function packingMode(s: SequenceStats): PackingMode {
  if (s.mergedEpisodes === 0 && s.splitEpisodes === 0) return 'single-turn';
  if (s.splitEpisodes === 0) return 'episode';
  return s.mergedEpisodes === 0 ? 'turn' : 'mixed';
}

/** The run log's line on how an iteration's passes packed the samples, and the key that changes when the modes do. */
export function describePacking(r: Pick<IterationResult, 'sequences' | 'teacherSequences'>, mergeTurns: boolean): { key: string; line: string } | null {
  if (r.sequences === null) return null;
  const describe = (s: SequenceStats): string => {
    const tokens = `${s.scoredPromptTokens} prompt tokens scored for ${s.responseTokens} response tokens`;
    switch (packingMode(s)) {
      case 'single-turn': return `one sequence per episode (every episode had one turn; ${tokens})`;
      case 'episode': return `one sequence per episode, the prompts append-only (${s.mergedEpisodes} episodes of several turns merged; ${tokens})`;
      case 'turn': return mergeTurns
        ? `one sequence per turn: the prompts re-render the history, not append-only (${tokens})`
        : `one sequence per turn, optim.mergeTurns off (${tokens})`;
      case 'mixed': return `${s.mergedEpisodes} episodes as one sequence, ${s.splitEpisodes} cut where a prompt re-renders the history (${tokens})`;
    }
  };
  const key = [r.sequences, r.teacherSequences].map((s) => (s ? packingMode(s) : '-')).join('/');
  const line = `scoring and training: ${describe(r.sequences)}${r.teacherSequences ? `; teacher: ${describe(r.teacherSequences)}` : ''}`;
  return { key, line };
}
