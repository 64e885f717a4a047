// The <think>…</think><action>…</action> answer format the household and shop agents
// share: turning a response into an environment action, the validity rule the reward
// uses (docs/PROTOCOLS.md section 1, docs/ALGORITHMS.md section 1), and the turn
// contract built on them.

import type { AgentSpec } from '../src/envs/agent_spec.ts';

export type InvalidReason = 'missing_action_tags' | 'missing_think_tags' | 'cjk';

export interface ParsedAction {
  /** What to send to the environment: the action when valid, the no-op "" when not. */
  action: string;
  /** The text between the first <action> and the next </action>, lower-cased and trimmed; null when absent. */
  extracted: string | null;
  valid: boolean;
  reason: InvalidReason | null;
}

/** Han, kana, hangul and their compatibility blocks. */
const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]/;

function between(text: string, open: string, close: string): string | null {
  const start = text.indexOf(open);
  if (start < 0) return null;
  const end = text.indexOf(close, start + open.length);
  return end < 0 ? null : text.slice(start + open.length, end);
}

export function parseAction(response: string): ParsedAction {
  const inner = between(response, '<action>', '</action>');
  const extracted = inner === null ? null : inner.trim().toLowerCase();
  let reason: InvalidReason | null = null;
  if (extracted === null) reason = 'missing_action_tags';
  else if (between(response, '<think>', '</think>') === null) reason = 'missing_think_tags';
  else if (CJK.test(response)) reason = 'cjk';
  return { action: reason === null ? extracted! : '', extracted, valid: reason === null, reason };
}

/** The turn contract of a <think>/<action> environment: an invalid turn sends the no-op "" ("Nothing happens."). */
export function thinkActionSpec(base: Pick<AgentSpec, 'env' | 'historyLength' | 'maxTurns' | 'renderPrompt' | 'skills'>): AgentSpec {
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
