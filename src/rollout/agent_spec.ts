// One turn contract over every environment kind (shared design PROTOCOLS.md section 1,
// ALGORITHMS.md section 1): how a turn's prompt is rendered, how a response becomes an
// action, what an invalid turn sends, and where skills come from. Looked up
// by environment name, so a RemoteEnvironment (named by its server's /health) gets the
// same spec as the in-process environment it serves.

import {
  HOUSEHOLD_HISTORY_LENGTH,
  HOUSEHOLD_MAX_STEPS,
  householdSkillCard,
  householdSkills,
  parseAction,
  renderHouseholdPrompt,
  TASK_TYPES,
} from '../../envs/household/index.ts';
import { cutResponse, parseSearchResponse, renderSearchPrompt, SEARCH_HISTORY_LENGTH, SEARCH_MAX_TURNS, searchSkill } from '../../envs/search/index.ts';
import { renderShopPrompt, SHOP_HISTORY_LENGTH, SHOP_MAX_STEPS, shopSkill } from '../../envs/shop/index.ts';

export interface TurnHistoryEntry {
  /** What the agent saw before acting. */
  observation: string;
  /** The action string of that turn (never the reasoning around it). */
  action: string;
}

export interface TurnPromptInput {
  task: string;
  /** Every earlier turn of the episode, oldest first; the renderer shows the last K. */
  history: readonly TurnHistoryEntry[];
  observation: string;
  admissibleActions: readonly string[];
  /** Skill text for the privileged block at the start of the user message. */
  skills?: string;
}

export interface ParsedTurn {
  /** What the environment receives: the action when valid, the spec's no-op otherwise. */
  send: string;
  /** What later prompts show as this turn's action. */
  historyAction: string;
  valid: boolean;
}

export interface AgentSpec {
  /** The environment kind this spec drives. */
  readonly env: string;
  /** K: how many earlier (observation, action) pairs each prompt shows. */
  readonly historyLength: number;
  /** The loop ends an episode after this many turns even if the environment has not. */
  readonly maxTurns: number;
  /** What the environment gets on an invalid turn: a harmless action it answers without changing state. */
  readonly noop: string;
  /**
   * Strings that close an action (search's </search>, </answer>). With the rollout's
   * stopAfterAction they are the engine's stop strings and the loop cuts responses
   * with `cutResponse`; otherwise responses run to the end of the turn, as the
   * reference generates them, and only the parser looks for the action.
   */
  readonly actionStops?: readonly string[];
  renderPrompt(input: TurnPromptInput): string;
  /** The response up to the end of its action: the whole text, or (search) up to the first closing tag. */
  cutResponse(response: string): string;
  parse(response: string): ParsedTurn;
  /** The skills block text for a task type (the general card when the type has none). */
  skills(taskType: string): string;
  /** A response in this environment's answer format that carries `action`, with `thought` as its reasoning. */
  formatResponse(thought: string, action: string): string;
}

/** Household and shop: <think>…</think><action>…</action>, no-op "" ("Nothing happens."). */
function thinkActionSpec(base: Pick<AgentSpec, 'env' | 'historyLength' | 'maxTurns' | 'renderPrompt' | 'skills'>): AgentSpec {
  return {
    ...base,
    noop: '',
    cutResponse: (response) => response,
    parse: (response) => {
      const p = parseAction(response);
      const send = p.valid ? p.action : '';
      return { send, historyAction: send, valid: p.valid };
    },
    formatResponse: (thought, action) => `<think>\n${thought}\n</think>\n<action>${action}</action>`,
  };
}

const HOUSEHOLD: AgentSpec = thinkActionSpec({
  env: 'household',
  historyLength: HOUSEHOLD_HISTORY_LENGTH,
  maxTurns: HOUSEHOLD_MAX_STEPS,
  renderPrompt: (input) => renderHouseholdPrompt({ ...input, historyLength: HOUSEHOLD_HISTORY_LENGTH }),
  // Real ALFWorld servers (AgentGym) label every task "alfworld": those get the general card.
  skills: (taskType) => ((TASK_TYPES as readonly string[]).includes(taskType) ? householdSkills(taskType) : householdSkillCard('general')),
});

const SHOP: AgentSpec = thinkActionSpec({
  env: 'shop',
  historyLength: SHOP_HISTORY_LENGTH,
  maxTurns: SHOP_MAX_STEPS,
  renderPrompt: (input) => renderShopPrompt({ ...input, historyLength: SHOP_HISTORY_LENGTH }),
  skills: shopSkill,
});

const SEARCH_STOP = ['</search>', '</answer>'] as const;

const SEARCH: AgentSpec = {
  env: 'search',
  historyLength: SEARCH_HISTORY_LENGTH,
  maxTurns: SEARCH_MAX_TURNS,
  // The environment answers any turn without a single well-formed block with Search-R1's "my previous action is invalid".
  noop: '',
  actionStops: SEARCH_STOP,
  renderPrompt: (input) => renderSearchPrompt({ ...input, historyLength: SEARCH_HISTORY_LENGTH }),
  cutResponse,
  parse: (response) => {
    const p = parseSearchResponse(response);
    return { send: p.valid ? p.action : '', historyAction: p.action, valid: p.valid };
  },
  skills: searchSkill,
  // The search expert's action is already a whole <search>/<answer> block.
  formatResponse: (thought, action) => `<think>\n${thought}\n</think>\n${action}`,
};

const SPECS: Record<string, AgentSpec> = {
  household: HOUSEHOLD,
  alfworld: { ...HOUSEHOLD, env: 'alfworld' },
  shop: SHOP,
  webshop: { ...SHOP, env: 'webshop' },
  search: SEARCH,
};

export function agentSpecNames(): string[] {
  return Object.keys(SPECS).sort();
}

/** The turn spec for an environment kind (an in-process Environment's or a remote server's name). */
export function agentSpec(env: string): AgentSpec {
  const spec = SPECS[env];
  if (spec === undefined) throw new Error(`no agent spec for environment "${env}" (known: ${agentSpecNames().join(', ')})`);
  return spec;
}
