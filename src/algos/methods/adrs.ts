// ADRS, teacher-aligned reward shaping (docs/ALGORITHMS.md section 3): no
// auxiliary loss; a dense per-token bonus from the teacher is added to the GRPO
// advantage during a window of iterations:
//   r_t = z-score of lT within its response;  τ̄_c = mean lT of response c
//   α_c = σ(τ̄_c − mean of τ̄ over the batch)
//   per group: TVA = Σα·R/Σα − Σ(1−α)·R/Σ(1−α),  m = σ(gateScale·TVA)
//   r'_t = shapingCoef·m·r_t
//   in groups whose scores spread (σ_group > 0): standardise r' over the group's
//   tokens, multiply by η, clip to ±clip·min(1, σ_group / median σ_group) (or
//   ±clip without adaptiveClip), add to A.
// R is each row's score, the episode return less that turn's invalid-action
// penalty, as the reference reads it. η = eta for startIteration ≤ iteration ≤
// endIteration, 0 otherwise; with activeEntropy the entropy coefficient is raised
// to entropyCoef over the same window. The WebShop launchers turn both switches off.
//
// Choices the text leaves open, made by this project:
// - Every z-score/standardisation uses the population std (divisor n) + 1e-6, as
//   AgentOPSD's does; σ_group, a spread of returns over samples, is the reference's
//   √(unbiased variance + 1e-8); a group whose returns are all equal (or a group of
//   one) has no spread and gets no bonus.
// - The median σ_group is over this batch's groups with spread; for an even count it
//   is the lower middle value, as torch.median gives it.
// - A TVA side with an empty sum (Σα = 0 or Σ(1−α) = 0, only when α saturates to 0
//   or 1 for every response of the group) gives TVA = 0: no contrast is measurable.
// - Responses with no tokens have no τ̄: they take no part in the batch mean of τ̄ nor
//   in the TVA sums, and receive A unchanged.
// Note that a group's m and shapingCoef are constant over its tokens, so the
// standardisation removes them up to the 1e-6 in its denominator; they are kept
// because the text defines r' that way.

import { z } from 'zod';
import type { StepSample } from '../../rollout/sample.ts';
import { defineMethod } from '../method.ts';
import { nonNegNum, posInt } from '../options.ts';
import { grpoPlan } from '../plan.ts';
import { checkTransformInputs, clip, groupIndices, lowerMedian, meanOf, sigmoid, zScores } from '../token_stats.ts';

const options = z.strictObject({
  /** r' = shapingCoef·m·r. */
  shapingCoef: nonNegNum.default(0.02),
  /** m = σ(gateScale·TVA). */
  gateScale: nonNegNum.default(2),
  /** η while active. */
  eta: nonNegNum.default(0.02),
  /** Shaping is active for iterations startIteration..endIteration (1-based, inclusive). */
  startIteration: posInt.default(21),
  endIteration: posInt.default(70),
  clip: nonNegNum.default(0.2),
  /** Shrink a group's clip by its score spread over the median spread. Default: the environment's (off for shop, as the WebShop launchers). */
  adaptiveClip: z.boolean().optional(),
  /** Raise the entropy coefficient to entropyCoef while shaping is active. Default: the environment's (off for shop). */
  activeEntropy: z.boolean().optional(),
  /** Entropy coefficient while shaping is active. */
  entropyCoef: nonNegNum.default(0.01),
}).refine((o) => o.startIteration <= o.endIteration, { path: ['startIteration'], message: 'must not exceed endIteration' });

export type AdrsConfig = Omit<z.output<typeof options>, 'adaptiveClip' | 'activeEntropy'> & { adaptiveClip: boolean; activeEntropy: boolean };

/** The WebShop launchers turn the adaptive clip and the raised entropy off; the others keep both. */
const WITHOUT_SWITCHES: ReadonlySet<string> = new Set(['shop']);

export type AdrsSample = Pick<StepSample, 'groupId' | 'responseIds' | 'score'>;

/** The reference's σ_group: √(unbiased variance + 1e-8); 0 when the returns do not differ (no spread). */
export function groupSpread(returns: readonly number[]): number {
  if (returns.length < 2) return 0;
  const m = meanOf(returns);
  let s = 0;
  for (const r of returns) s += (r - m) ** 2;
  return s > 0 ? Math.sqrt(s / (returns.length - 1) + 1e-8) : 0;
}

/** Whether shaping is on at a 1-based iteration. */
export function adrsActive(iteration: number, cfg: AdrsConfig): boolean {
  return iteration >= cfg.startIteration && iteration <= cfg.endIteration;
}

/** The entropy coefficient at a 1-based iteration: cfg.entropyCoef while shaping is on (with activeEntropy), else `base`. */
export function adrsEntropyCoef(iteration: number, cfg: AdrsConfig, base: number): number {
  return cfg.activeEntropy && adrsActive(iteration, cfg) ? cfg.entropyCoef : base;
}

export function adrsAdvantages(
  samples: readonly AdrsSample[],
  adv: Float64Array,
  teacher: readonly Float32Array[],
  iteration: number,
  cfg: AdrsConfig,
): { advantages: Float32Array[]; metrics: Record<string, number> } {
  const fn = 'adrsAdvantages';
  checkTransformInputs(fn, samples, adv, [{ name: 'teacher log-probs', arrays: teacher }]);
  samples.forEach((s, i) => {
    if (!Number.isFinite(s.score)) throw new Error(`${fn}: sample ${i}: score is ${s.score}`);
  });
  const eta = adrsActive(iteration, cfg) ? cfg.eta : 0;

  const scored = samples.map((s) => s.responseIds.length > 0);
  const tauBar = teacher.map((lt) => meanOf(lt));
  const batchTau = meanOf(tauBar.filter((_, i) => scored[i]));
  const alpha = tauBar.map((tau, i) => (scored[i] ? sigmoid(tau - batchTau) : 0));

  const groups = [...groupIndices(samples, (s) => s.groupId).values()];
  const spread = groups.map((idx) => groupSpread(idx.map((i) => samples[i].score)));
  const spreadOnes = spread.filter((s) => s > 0);
  const medianSpread = spreadOnes.length > 0 ? lowerMedian(spreadOnes) : 0;

  const advantages = samples.map((s, i) => new Float32Array(s.responseIds.length).fill(adv[i]));
  const gates: number[] = [];
  const tvas: number[] = [];
  let shapedTokens = 0;
  let shapedAbs = 0;
  let clipped = 0;
  groups.forEach((idx, g) => {
    const members = idx.filter((i) => scored[i]);
    let wHigh = 0;
    let wLow = 0;
    let rHigh = 0;
    let rLow = 0;
    for (const i of members) {
      wHigh += alpha[i];
      wLow += 1 - alpha[i];
      rHigh += alpha[i] * samples[i].score;
      rLow += (1 - alpha[i]) * samples[i].score;
    }
    const tva = wHigh > 0 && wLow > 0 ? rHigh / wHigh - rLow / wLow : 0;
    const m = sigmoid(cfg.gateScale * tva);
    if (members.length > 0) {
      tvas.push(tva);
      gates.push(m);
    }
    if (!(spread[g] > 0)) return;
    const shaped: number[] = [];
    for (const i of members) for (const r of zScores(teacher[i])) shaped.push(cfg.shapingCoef * m * r);
    const bound = cfg.adaptiveClip ? cfg.clip * Math.min(1, spread[g] / medianSpread) : cfg.clip;
    const standard = zScores(shaped);
    let k = 0;
    for (const i of members) {
      for (let t = 0; t < samples[i].responseIds.length; t++, k++) {
        const raw = eta * standard[k];
        const bonus = clip(raw, -bound, bound);
        advantages[i][t] = adv[i] + bonus;
        shapedTokens++;
        shapedAbs += Math.abs(bonus);
        if (bonus !== raw) clipped++;
      }
    }
  });

  const metrics: Record<string, number> = { 'adrs/eta': eta };
  if (groups.length > 0) metrics['adrs/groups_with_spread'] = spreadOnes.length / groups.length;
  if (gates.length > 0) {
    metrics['adrs/gate_mean'] = meanOf(gates);
    metrics['adrs/tva_mean'] = meanOf(tvas);
    metrics['adrs/alpha_mean'] = meanOf(alpha.filter((_, i) => scored[i]));
  }
  if (shapedTokens > 0) {
    metrics['adrs/bonus_abs_mean'] = shapedAbs / shapedTokens;
    metrics['adrs/clip_frac'] = clipped / shapedTokens;
  }
  return { advantages, metrics };
}

export const adrs = defineMethod({
  name: 'adrs',
  summary: 'teacher-shaped advantage bonus in iterations 21-70, entropy 0.01 while active',
  options,
  resolve: (o, env): AdrsConfig => ({
    ...o,
    adaptiveClip: o.adaptiveClip ?? !WITHOUT_SWITCHES.has(env),
    activeEntropy: o.activeEntropy ?? !WITHOUT_SWITCHES.has(env),
  }),
  loop: 'rl',
  plan: ({ iteration, options: o, entropyCoef }) => {
    const active = adrsActive(iteration, o);
    const plan = { ...grpoPlan(adrsEntropyCoef(iteration, o, entropyCoef)), metrics: { 'adrs/active': active ? 1 : 0 } };
    if (!active) return plan;
    return {
      ...plan, skills: 'teacher', teacher: true,
      transform: (x) => {
        if (!x.teacher) throw new Error('adrs: the advantage transform needs teacher log-probs');
        return adrsAdvantages(x.samples, x.advantages, x.teacher, iteration, o);
      },
    };
  },
});
