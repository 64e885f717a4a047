// Every training method as a composition over the GRPO backbone (shared design
// ALGORITHMS.md section 3): where the skills block goes, whether a teacher pass
// runs, an advantage transform (RLSD, AgentOPSD, ADRS, GiGPO), an auxiliary loss
// term (SDAR, OPSD, GRPO+OPSD, Skill-SD, PCSD, RetireOPD's stage 2), and per-
// iteration schedules (RLSD's λ, ADRS's active window and entropy coefficient).
// A method is one entry here; the iteration loop does not know method names.

import { adrsActive, adrsAdvantages, adrsEntropyCoef } from '../algos/adrs.ts';
import { agentOpsdAdvantages } from '../algos/agent_opsd.ts';
import { sdarTerm, skillSdTerm } from '../algos/distill_loss.ts';
import { gigpoAdvantages } from '../algos/gigpo.ts';
import { pcsdGate, pcsdTerm } from '../algos/pcsd.ts';
import { rlsdAdvantages, rlsdLambda } from '../algos/rlsd.ts';
import type { SkillsMode } from '../rollout/agent_loop.ts';
import type { StepSample } from '../rollout/sample.ts';
import { scale, sub } from '../tensor/ops/index.ts';
import { tensor } from '../tensor/tensor.ts';
import type { EnvName, Method, TrainConfig } from './config_schema.ts';
import type { Metrics } from './metrics.ts';
import type { AuxLoss } from './update.ts';

/** Methods `train` runs (SFT by its own loop, RetireOPD as two chained runs). */
export const TRAIN_METHODS: readonly Method[] = [
  'grpo', 'skill_grpo', 'sdar', 'opsd', 'grpo_opsd', 'rlsd', 'skill_sd', 'retire_opd', 'agent_opsd', 'adrs', 'pcsd', 'gigpo', 'sft',
];

/** Methods that are this project's reading of a paper with no public code; their output says so. */
export const INTERPRETED_METHODS: Readonly<Partial<Record<Method, string>>> = {
  pcsd: 'PCSD is this project\'s reading of the paper\'s abstract (no public code): gate σ(β·(S + γ·trend)) over a decayed causal sum S of the teacher gap',
  retire_opd: 'RetireOPD is this project\'s design (no public code): stage-1 Skill-GRPO teacher, stage-2 student with SDAR-form distillation that retires',
};

/** An episode's best return per environment, to read returns as success probabilities (AgentOPSD's prior). */
export const MAX_RETURN: Record<EnvName, number> = { household: 10, shop: 10, search: 1 };

export interface TransformInputs {
  samples: readonly StepSample[];
  /** The backbone's per-sample GRPO advantages. */
  advantages: Float64Array;
  /** lT per response token; null when the plan has no teacher pass. */
  teacher: Float32Array[] | null;
  /** lold per response token (recomputed with the current weights). */
  old: Float32Array[];
}

export type AdvantageTransform = (x: TransformInputs) => { advantages: Float32Array[]; metrics: Metrics };

/** What one iteration of a method does. */
export interface IterationPlan {
  skills: SkillsMode;
  teacher: boolean;
  policyGradient: boolean;
  entropyCoef: number;
  transform: AdvantageTransform | null;
  aux: AuxLoss | null;
  /** Schedules in force this iteration (RLSD's λ, ADRS's η...). */
  metrics: Metrics;
}

/** Run state a method carries across iterations (saved in checkpoints). */
export interface MethodState {
  /** RetireOPD stage 2: the distillation has retired (coefficient 0, no teacher pass). */
  distillRetired: boolean;
}

function needTeacher(x: TransformInputs, method: string): Float32Array[] {
  if (!x.teacher) throw new Error(`${method}: the advantage transform needs teacher log-probs`);
  return x.teacher;
}

const sdarAux = (beta: number, coef: number): AuxLoss => async (x) => {
  const r = sdarTerm(x, beta);
  return { loss: scale(r.term, coef), stats: { 'sdar/gate_mean': r.gateMean, 'sdar/gate_above_half': r.gateShare, 'sdar/gap': r.gap } };
};

const skillSdAux = (cfg: TrainConfig['algorithm']['skill_sd']): AuxLoss => async (x) => {
  const r = skillSdTerm(x, { ratioCap: cfg.ratioCap, gapCap: cfg.gapCap });
  return { loss: scale(r.term, cfg.coef), stats: { 'skill_sd/k3': r.k3Mean, 'skill_sd/ratio': r.ratioMean } };
};

// The gate is a stop-gradient function of Δ = lT − lθ along each response, a scan, so
// it is computed on the CPU from lθ's current values.
const pcsdAux = (cfg: TrainConfig['algorithm']['pcsd']): AuxLoss => async (x) => {
  const delta = Float32Array.from(await sub(x.teacherLogprobs, x.logprobs).toArray());
  const gate = tensor(pcsdGate(delta, x.segments, cfg));
  const r = pcsdTerm(x, gate);
  return { loss: scale(r.term, cfg.coef), stats: { 'pcsd/gate_mean': r.gateMean } };
};

const GRPO: IterationPlan = { skills: 'none', teacher: false, policyGradient: true, entropyCoef: 0, transform: null, aux: null, metrics: {} };

/** The plan of `iteration` (1-based) for the configured method. */
export function planIteration(cfg: TrainConfig, iteration: number, state: MethodState): IterationPlan {
  const a = cfg.algorithm;
  const base: IterationPlan = { ...GRPO, entropyCoef: a.entropyCoef };
  switch (cfg.method) {
    case 'grpo':
      return base;
    case 'skill_grpo':
      return { ...base, skills: 'policy' };
    case 'sdar':
      return { ...base, skills: 'teacher', teacher: true, aux: sdarAux(a.sdar.beta, a.sdar.coef) };
    case 'opsd':
      return { ...base, skills: 'teacher', teacher: true, policyGradient: false, aux: sdarAux(a.sdar.beta, a.sdar.coef) };
    case 'grpo_opsd':
      return { ...base, skills: 'teacher', teacher: true, aux: sdarAux(0, a.sdar.coef) };
    case 'skill_sd':
      return { ...base, skills: 'teacher', teacher: true, aux: skillSdAux(a.skill_sd) };
    case 'pcsd':
      return { ...base, skills: 'teacher', teacher: true, aux: pcsdAux(a.pcsd) };
    case 'retire_opd':
      if (state.distillRetired) return { ...base, metrics: { 'retire/retired': 1 } };
      return { ...base, skills: 'teacher', teacher: true, aux: sdarAux(a.retire_opd.beta, a.retire_opd.coef), metrics: { 'retire/retired': 0 } };
    case 'rlsd': {
      const lambda = rlsdLambda(iteration, a.rlsd);
      // After the decay RLSD is plain GRPO: the teacher pass would be wasted.
      if (lambda <= 0) return { ...base, metrics: { 'rlsd/lambda': 0 } };
      return {
        ...base, skills: 'teacher', teacher: true, metrics: { 'rlsd/lambda': lambda },
        transform: (x) => rlsdAdvantages(x.samples, x.advantages, needTeacher(x, 'rlsd'), x.old, lambda, a.rlsd),
      };
    }
    case 'agent_opsd':
      return {
        ...base, skills: 'teacher', teacher: true,
        transform: (x) => agentOpsdAdvantages(x.samples, x.advantages, needTeacher(x, 'agent_opsd'), x.old, a.agent_opsd, MAX_RETURN[cfg.env.name]),
      };
    case 'adrs': {
      const active = adrsActive(iteration, a.adrs);
      const plan = { ...base, entropyCoef: adrsEntropyCoef(iteration, a.adrs, a.entropyCoef), metrics: { 'adrs/active': active ? 1 : 0 } };
      if (!active) return plan;
      return { ...plan, skills: 'teacher', teacher: true, transform: (x) => adrsAdvantages(x.samples, x.advantages, needTeacher(x, 'adrs'), iteration, a.adrs) };
    }
    case 'gigpo':
      return { ...base, transform: (x) => gigpoAdvantages(x.samples, x.advantages, a.gigpo) };
    case 'sft':
      throw new Error('planIteration: sft has no RL iterations (train runs it with its own loop)');
  }
}
