// GiGPO (verl-agent; shared design ALGORITHMS.md section 3): besides the episode
// group, turns of one task group that acted on the identical observation form a step
// group, and their discounted returns are compared within it:
//   ret = γ^(T−1−turn)·R − c·[this turn invalid]  (T = turns of the sample's
//   trajectory, R its return; the turn's own invalid-action penalty comes off after
//   discounting, as verl-agent applies it to step rewards)
//   A_step = (ret − mean) / (std + 1e-6) within the step group, std unbiased as in
//   the backbone; a step group of one gets A_step = 0
//   Â = A_episode + stepWeight·A_step on every token of the sample.
// The return is discounted from the episode's end because the environments pay only
// there; a step group thus prefers the turns that led to success sooner.

import type { StepSample } from '../rollout/sample.ts';
import type { TrainConfig } from '../trainer/config_schema.ts';
import { ADVANTAGE_EPS } from './advantage.ts';
import { checkTransformInputs, groupIndices, meanOf, trajectoryTurns, unbiasedStd } from './token_stats.ts';

export type GigpoConfig = TrainConfig['algorithm']['gigpo'];

export type GigpoSample = Pick<StepSample, 'groupId' | 'trajectoryId' | 'turn' | 'responseIds' | 'episodeReturn' | 'score' | 'state'>;

export function gigpoAdvantages(
  samples: readonly GigpoSample[],
  adv: Float64Array,
  cfg: GigpoConfig,
): { advantages: Float32Array[]; metrics: Record<string, number> } {
  const fn = 'gigpoAdvantages';
  checkTransformInputs(fn, samples, adv, []);
  samples.forEach((s, i) => {
    if (!Number.isFinite(s.episodeReturn)) throw new Error(`${fn}: sample ${i}: episode return is ${s.episodeReturn}`);
    if (!Number.isFinite(s.score)) throw new Error(`${fn}: sample ${i}: score is ${s.score}`);
  });
  const stepReturn = new Float64Array(samples.length);
  for (const turns of trajectoryTurns(fn, samples).values()) {
    // score = R − the turn's penalty, so the penalty is R − score.
    for (const i of turns) {
      const s = samples[i];
      stepReturn[i] = cfg.gamma ** (turns.length - 1 - s.turn) * s.episodeReturn - (s.episodeReturn - s.score);
    }
  }

  // Keyed by group, then state: one string key would let a state that contains the
  // separator collide with another group's.
  const stepGroups: number[][] = [];
  for (const idx of groupIndices(samples, (s) => s.groupId).values()) {
    for (const members of groupIndices(idx, (i) => samples[i].state).values()) stepGroups.push(members.map((k) => idx[k]));
  }
  const stepAdv = new Float64Array(samples.length);
  let shared = 0;
  for (const members of stepGroups) {
    if (members.length < 2) continue;
    shared += members.length;
    const rets = members.map((i) => stepReturn[i]);
    const mean = meanOf(rets);
    const std = unbiasedStd(rets, mean);
    for (const i of members) stepAdv[i] = (stepReturn[i] - mean) / (std + ADVANTAGE_EPS);
  }

  const advantages = samples.map((s, i) => new Float32Array(s.responseIds.length).fill(adv[i] + cfg.stepWeight * stepAdv[i]));
  const metrics: Record<string, number> = {};
  if (samples.length > 0) {
    metrics['gigpo/shared_step_frac'] = shared / samples.length;
    metrics['gigpo/step_group_size'] = samples.length / stepGroups.length;
  }
  return { advantages, metrics };
}
