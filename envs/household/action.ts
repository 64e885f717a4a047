// Turning a model response into an environment action, and the validity rule the
// reward uses (PROTOCOLS.md section 1, ALGORITHMS.md section 1).

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
