// AgentOPSD, recursive belief credit (shared design ALGORITHMS.md section 3): no
// auxiliary loss. The teacher-vs-rollout log-prob gap of each step updates a belief
// that the episode succeeds, starting from a prior for the group:
//   V0 = clamp(mean over the group's trajectories of a score, c, 1 − c)
//   V_k = clamp(σ(logit V0 + Σ_{j≤k} d_j), ε, 1 − ε),  V_{−1} = V0,  q_k = V_k − V_{k−1}
//   z = (q − mean q) / (spread + ε) over the episode's steps
//   m = clip(1 + scale·sign(A)·z, clipLow, clipHigh),  Â = A·((1 − mix) + mix·m)
// with ε = 1e-6. Turn granularity: a step is a turn, d_k = Σ over its tokens of
// (lT − lold), m covers every token of the turn and the spread is the population
// std. Token granularity: the same recipe inside one response, each token a step
// with d_t = lT − lold, and the spread √(population variance + ε).
// The prior's score is what the reference code averages: each trajectory's first
// turn's raw score (R − the invalid-action penalty of that turn), which for returns
// of 10 puts V0 at the clamp whenever a group has a success; `prior: success_rate`
// averages R/maxReturn instead, a success probability.

import type { StepSample } from '../rollout/sample.ts';
import type { TrainConfig } from '../trainer/config_schema.ts';
import { checkTransformInputs, clip, groupIndices, logit, meanOf, populationStd, sigmoid, trajectoryTurns, zScores } from './token_stats.ts';

export type AgentOpsdConfig = TrainConfig['algorithm']['agent_opsd'];

export type AgentOpsdSample = Pick<StepSample, 'groupId' | 'trajectoryId' | 'turn' | 'responseIds' | 'episodeReturn' | 'score'>;

/** The reference's bound on beliefs and its z-score epsilon. */
const EPS = 1e-6;

/** q_k = V_k − V_{k−1} along one episode (or one response) of step gaps d, beliefs clamped to [ε, 1 − ε]. */
function beliefIncrements(prior: number, d: ArrayLike<number>): Float64Array {
  const q = new Float64Array(d.length);
  let l = logit(prior);
  let prev = prior;
  for (let k = 0; k < d.length; k++) {
    l += d[k];
    const v = clip(sigmoid(l), EPS, 1 - EPS);
    q[k] = v - prev;
    prev = v;
  }
  return q;
}

/** Token granularity's z-score: (x − mean) / (√(population variance + ε) + ε). */
function tokenZScores(xs: Float64Array): Float64Array {
  const out = new Float64Array(xs.length);
  if (xs.length === 0) return out;
  const m = meanOf(xs);
  const sd = populationStd(xs, m);
  const d = Math.sqrt(sd * sd + EPS) + EPS;
  for (let i = 0; i < xs.length; i++) out[i] = (xs[i] - m) / d;
  return out;
}

export function agentOpsdAdvantages(
  samples: readonly AgentOpsdSample[],
  adv: Float64Array,
  teacher: readonly Float32Array[],
  old: readonly Float32Array[],
  cfg: AgentOpsdConfig,
  maxReturn: number,
): { advantages: Float32Array[]; metrics: Record<string, number> } {
  const fn = 'agentOpsdAdvantages';
  checkTransformInputs(fn, samples, adv, [
    { name: 'teacher log-probs', arrays: teacher },
    { name: 'old log-probs', arrays: old },
  ]);
  if (!(maxReturn > 0) || !Number.isFinite(maxReturn)) throw new Error(`${fn}: maxReturn must be a positive number, got ${maxReturn}`);
  const trajectories = trajectoryTurns(fn, samples);

  const episodes = [...trajectories.values()];
  const priors = new Map<string, number>();
  // trajectoryTurns lists each episode's samples in turn order, so turns[0] is its first turn.
  const priorScore = (turns: number[]) => (cfg.prior === 'raw_score' ? samples[turns[0]].score : samples[turns[0]].episodeReturn / maxReturn);
  for (const [groupId, idx] of groupIndices(episodes, (turns) => samples[turns[0]].groupId)) {
    priors.set(groupId, clip(meanOf(idx.map((e) => priorScore(episodes[e]))), cfg.priorClamp, 1 - cfg.priorClamp));
  }

  const gap = (i: number, t: number) => teacher[i][t] - old[i][t];
  const advantages = samples.map((s) => new Float32Array(s.responseIds.length));
  const ms: number[] = [];
  let clipped = 0;
  /** Gives token t of sample i the multiplier of belief z-score z. */
  const assign = (i: number, t: number, z: number) => {
    const raw = 1 + cfg.scale * Math.sign(adv[i]) * z;
    const m = clip(raw, cfg.clipLow, cfg.clipHigh);
    advantages[i][t] = adv[i] * (1 - cfg.mix + cfg.mix * m);
    ms.push(m);
    if (m !== raw) clipped++;
  };

  if (cfg.granularity === 'turn') {
    for (const turns of trajectories.values()) {
      const d = turns.map((i) => {
        let sum = 0;
        for (let t = 0; t < samples[i].responseIds.length; t++) sum += gap(i, t);
        return sum;
      });
      const z = zScores(beliefIncrements(priors.get(samples[turns[0]].groupId)!, d));
      turns.forEach((i, k) => {
        for (let t = 0; t < samples[i].responseIds.length; t++) assign(i, t, z[k]);
      });
    }
  } else {
    samples.forEach((s, i) => {
      const d = Float64Array.from({ length: s.responseIds.length }, (_, t) => gap(i, t));
      const z = tokenZScores(beliefIncrements(priors.get(s.groupId)!, d));
      for (let t = 0; t < d.length; t++) assign(i, t, z[t]);
    });
  }

  const metrics: Record<string, number> = {};
  if (priors.size > 0) metrics['agent_opsd/prior_mean'] = meanOf([...priors.values()]);
  if (ms.length > 0) {
    const mean = meanOf(ms);
    metrics['agent_opsd/multiplier_mean'] = mean;
    metrics['agent_opsd/multiplier_std'] = populationStd(ms, mean);
    metrics['agent_opsd/clip_frac'] = clipped / ms.length;
  }
  return { advantages, metrics };
}
