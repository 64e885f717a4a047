// Every training method, by name: the one list the config, the trainer and the CLI
// read. Adding a method is a file in this folder and a line here.

import type { AnyMethod } from '../method.ts';
import { adrs } from './adrs.ts';
import { agentOpsd } from './agent_opsd.ts';
import { drGrpo } from './dr_grpo.ts';
import { gigpo } from './gigpo.ts';
import { grpo } from './grpo.ts';
import { grpoOpsd } from './grpo_opsd.ts';
import { opsd } from './opsd.ts';
import { pcsd } from './pcsd.ts';
import { retireOpd } from './retire_opd.ts';
import { rlsd } from './rlsd.ts';
import { sdar } from './sdar.ts';
import { sft } from './sft.ts';
import { skillGrpo } from './skill_grpo.ts';
import { skillSd } from './skill_sd.ts';

export const METHOD_DEFINITIONS = {
  grpo,
  skill_grpo: skillGrpo,
  sdar,
  opsd,
  grpo_opsd: grpoOpsd,
  rlsd,
  skill_sd: skillSd,
  retire_opd: retireOpd,
  agent_opsd: agentOpsd,
  adrs,
  pcsd,
  gigpo,
  dr_grpo: drGrpo,
  sft,
} as const;

export type MethodName = keyof typeof METHOD_DEFINITIONS;

export const METHOD_NAMES = Object.keys(METHOD_DEFINITIONS) as MethodName[];

/** A method's definition by name, with its types erased (the config has checked its options). */
export function methodDefinition(name: MethodName): AnyMethod {
  return METHOD_DEFINITIONS[name] as unknown as AnyMethod;
}
