// The <think>…</think><action>…</action> answer format the household and shop agents
// share: turning a response into an environment action, the validity rule the reward
// uses (docs/PROTOCOLS.md section 1, docs/ALGORITHMS.md section 1), and the turn
// contract built on them.

import type { AgentSpec } from '../src/envs/agent_spec.ts';
import type { ReasoningFormat } from '../src/tokenizer/thinking.ts';

export type InvalidReason = 'missing_action_tags' | 'missing_think_tags' | 'cjk';

export interface ParsedAction {
  /** What to send to the environment: the reference's projection, whether or not the turn is valid. */
  action: string;
  /** The text between the first <action> and the first </action>, lower-cased and trimmed; null when either tag is absent. */
  extracted: string | null;
  valid: boolean;
  reason: InvalidReason | null;
}

/** Han ideographs, the only script the reference's projection checks for. */
const CJK = /[\u4e00-\u9fff]/;

/**
 * The reference's projection (verl-agent's alfworld_projection and webshop_projection):
 * the response is lower-cased and the text between the first `<action>` and the first
 * `</action>` is the action, sent even when the turn is invalid for a missing
 * `<think>…</think>` or a Han character. Without both action tags the turn is invalid
 * and the environment still receives the response's last `tailChars` characters
 * (30 for ALFWorld, 20 for WebShop), which it answers as an unknown command. A
 * `</action>` before the first `<action>` gives the empty action, as Python's slice does.
 * With thinking switched off (`reasoning` 'none') the prompt asks for no think block,
 * so none is required.
 */
export function parseAction(response: string, tailChars = 30, reasoning: ReasoningFormat = 'tags'): ParsedAction {
  const lower = response.toLowerCase();
  const start = lower.indexOf('<action>');
  const end = lower.indexOf('</action>');
  if (start < 0 || end < 0) return { action: lower.slice(-tailChars), extracted: null, valid: false, reason: 'missing_action_tags' };
  const extracted = lower.slice(start + '<action>'.length, end).trim();
  let reason: InvalidReason | null = null;
  if (reasoning !== 'none' && (!response.includes('<think>') || !response.includes('</think>'))) reason = 'missing_think_tags';
  else if (CJK.test(response)) reason = 'cjk';
  return { action: extracted, extracted, valid: reason === null, reason };
}

/**
 * A response's reasoning in front of its action: the reference's tagged block
 * ('tags', followed by `after`), the block a thinking template renders ('native', two
 * newlines after, as Qwen3's template writes it), or nothing ('none').
 */
export function reasoningBlock(thought: string, reasoning: ReasoningFormat, after: string): string {
  if (reasoning === 'none') return '';
  return `<think>\n${thought}\n</think>${reasoning === 'native' ? '\n\n' : after}`;
}

/** How a prompt asks for reasoning: `tagged` asks for it in <think> </think> tags, `plain` for reasoning in the model's own think block, nothing when thinking is off. */
export function reasoningRequest(reasoning: ReasoningFormat | undefined, tagged: string, plain: string): string {
  return reasoning === 'none' ? '' : reasoning === 'native' ? plain : tagged;
}

/**
 * The turn contract of a <think>/<action> environment: every turn sends the projected
 * action (an invalid one too, as the reference does); the invalid flag carries the
 * penalty. `tailChars` is how much of an untagged response is sent.
 */
export function thinkActionSpec(base: Pick<AgentSpec, 'env' | 'historyLength' | 'maxTurns' | 'renderPrompt' | 'skills'>, tailChars: number): AgentSpec {
  return {
    ...base,
    noop: '',
    cutResponse: (response) => response,
    parse: (response, reasoning) => {
      const p = parseAction(response, tailChars, reasoning);
      return { send: p.action, historyAction: p.action, valid: p.valid };
    },
    formatResponse: (thought, action, reasoning = 'tags') => `${reasoningBlock(thought, reasoning, '\n')}<action>${action}</action>`,
  };
}
