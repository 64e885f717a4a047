// Rollout correction (docs/ALGORITHMS.md section 1.9). The engine that samples a
// rollout (the local engine's f16 decode weights, a bf16 vLLM server) draws from its
// own distribution π_rollout, while the loss treats the trainer's recomputed π_old as
// the one that sampled. Each response token's ratio ρ = π_old / π_rollout, or the
// product of a turn's ratios, weighs that token's policy-gradient loss by ω:
//   tis:       ω = min(ρ_t, C)
//   seq-tis:   ω = min(ρ_s, C)                 ρ_s = Π ρ_t over the turn's tokens
//   mask:      ω = ρ_t·[1/C ≤ ρ_t ≤ C]
//   seq-mask:  ω = ρ_s·[1/C ≤ ρ_s ≤ C]
// bypass instead takes π_rollout as π_old (verl's bypass mode): the engine's log-probs
// are the importance weight's denominator, no pass recomputes them, and ω = 1.
// Everything here runs on the host in float64 over per-token arrays; a token whose
// two log-probs are equal gets ω = 1 exactly, so the loss is then the uncorrected one.

import type { StepSample } from '../rollout/sample.ts';

export const ROLLOUT_CORRECTION_MODES = ['off', 'tis', 'seq-tis', 'mask', 'seq-mask', 'bypass'] as const;
export type RolloutCorrectionMode = (typeof ROLLOUT_CORRECTION_MODES)[number];

export interface RolloutCorrection {
  mode: RolloutCorrectionMode;
  /** C: the truncation cap, or the mask's window [1/C, C]; unused by off and bypass. */
  cap: number;
}

/** TRL GRPOTrainer's default vllm_importance_sampling_mode, sequence_mask. */
export const DEFAULT_ROLLOUT_CORRECTION_MODE: RolloutCorrectionMode = 'seq-mask';

/**
 * C when the config leaves it unset: 2 for the truncating modes (verl's
 * rollout_is_threshold), 3 for the masking ones (TRL's vllm_importance_sampling_clip_max).
 */
export function defaultCap(mode: RolloutCorrectionMode): number {
  return masks(mode) ? 3 : 2;
}

/** Log-ratios are clamped to ±20 before exp, as verl bounds them, so a product over a long turn stays finite. */
const LOG_RATIO_BOUND = 20;

function bounded(logRatio: number): number {
  return Math.min(LOG_RATIO_BOUND, Math.max(-LOG_RATIO_BOUND, logRatio));
}

function ratioOf(logRatio: number): number {
  return Math.exp(bounded(logRatio));
}

function masks(mode: RolloutCorrectionMode): boolean {
  return mode === 'mask' || mode === 'seq-mask';
}

function perTurn(mode: RolloutCorrectionMode): boolean {
  return mode === 'seq-tis' || mode === 'seq-mask';
}

/** Whether the correction weighs tokens: a mode other than off and bypass. */
export function correcting(c: RolloutCorrection | undefined): c is RolloutCorrection {
  return c !== undefined && c.mode !== 'off' && c.mode !== 'bypass';
}

/** Whether the engine's log-probs stand for the old policy's (bypass), so that no pass recomputes them. */
export function bypassing(c: RolloutCorrection | undefined): c is RolloutCorrection {
  return c?.mode === 'bypass';
}

/** The ratio is truncated (above C) or masked (outside [1/C, C]). */
function cut(ratio: number, c: RolloutCorrection): boolean {
  return ratio > c.cap || (masks(c.mode) && ratio < 1 / c.cap);
}

function weightOf(ratio: number, c: RolloutCorrection): number {
  if (!masks(c.mode)) return Math.min(ratio, c.cap);
  return cut(ratio, c) ? 0 : ratio;
}

/** The weight of each of a turn's response tokens, from lold and the engine's log-probs of them (a mode other than off). */
export function correctionWeights(old: ArrayLike<number>, rollout: ArrayLike<number>, c: RolloutCorrection): Float32Array {
  const out = new Float32Array(old.length);
  if (perTurn(c.mode)) {
    let logRatio = 0;
    for (let j = 0; j < old.length; j++) logRatio += old[j] - rollout[j];
    return out.fill(weightOf(ratioOf(logRatio), c));
  }
  for (let j = 0; j < old.length; j++) out[j] = weightOf(ratioOf(old[j] - rollout[j]), c);
  return out;
}

/** A turn has the engine's log-prob of every response token. */
function hasRolloutLogprobs(s: StepSample): boolean {
  return s.responseLogprobs.length === s.responseIds.length;
}

/**
 * Refuses samples whose engine reported no log-probs while a correction or bypass is on:
 * training them would leave them uncorrected, or without an old policy, without saying so.
 */
export function checkRolloutLogprobs(samples: readonly StepSample[], c: RolloutCorrection | undefined): void {
  if (!correcting(c) && !bypassing(c)) return;
  const missing = samples.filter((s) => !hasRolloutLogprobs(s));
  if (missing.length === 0) return;
  const s = missing[0];
  const reads = bypassing(c) ? "takes the rollout engine's own log-probs as the old policy's" : "weighs each response token by the rollout engine's own log-prob of it";
  throw new Error(
    `algorithm.rolloutCorrection.mode is ${c.mode}, which ${reads}, `
    + `but ${missing.length} of the iteration's ${samples.length} turns came without them (first: trajectory ${s.trajectoryId}, turn ${s.turn}, `
    + `${s.responseIds.length} tokens and ${s.responseLogprobs.length} log-probs). Roll out with an engine that reports the sampled tokens' `
    + 'log-probs, or set algorithm.rolloutCorrection.mode=off to train without the correction',
  );
}

/**
 * The iteration's mismatch between engine and trainer: the ratio's mean, min and max
 * over tokens (over turns for the sequence modes), the share of them truncated or
 * masked, and KL(π_rollout ‖ π_old) estimated by k3 = ρ − 1 − log ρ over every sampled
 * token. Turns without the engine's log-probs take no part; without a correction the
 * ratios are the tokens'.
 */
export function rolloutCorrectionMetrics(samples: readonly StepSample[], old: readonly ArrayLike<number>[], c: RolloutCorrection | undefined): Record<string, number> {
  const mode = c?.mode ?? 'off';
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let units = 0;
  let cuts = 0;
  let k3 = 0;
  let tokens = 0;
  const see = (ratio: number) => {
    sum += ratio;
    min = Math.min(min, ratio);
    max = Math.max(max, ratio);
    units++;
    if (correcting(c) && cut(ratio, c)) cuts++;
  };
  samples.forEach((s, i) => {
    if (!hasRolloutLogprobs(s) || s.responseIds.length === 0) return;
    let turnLogRatio = 0;
    for (let j = 0; j < s.responseIds.length; j++) {
      const logRatio = old[i][j] - s.responseLogprobs[j];
      const b = bounded(logRatio);
      const ratio = Math.exp(b);
      k3 += ratio - 1 - b;
      tokens++;
      turnLogRatio += logRatio;
      if (!perTurn(mode)) see(ratio);
    }
    if (perTurn(mode)) see(ratioOf(turnLogRatio));
  });
  if (units === 0) return {};
  const out: Record<string, number> = {
    'rollout/is_ratio_mean': sum / units,
    'rollout/is_ratio_min': min,
    'rollout/is_ratio_max': max,
    'rollout/mismatch_kl': k3 / tokens,
  };
  if (correcting(c)) out[masks(mode) ? 'rollout/is_masked_share' : 'rollout/is_truncated_share'] = cuts / units;
  return out;
}
