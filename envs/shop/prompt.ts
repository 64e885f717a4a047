// The shop's per-turn prompt and the parser for the model's answer (PROTOCOLS.md
// section 1): role, task, steps taken, the last K observation/action pairs, the
// current observation, the admissible actions, and the answer format. The optional
// privileged skills block goes first, for the teacher.

export interface TurnRecord {
  observation: string;
  /** The extracted action string, never the reasoning around it. */
  action: string;
}

export interface PromptInput {
  task: string;
  /** Every earlier turn, oldest first; the renderer keeps the last K. */
  history: readonly TurnRecord[];
  observation: string;
  admissibleActions: readonly string[];
  /** Skill card text for the teacher's prompt; absent for the student. */
  skill?: string;
}

export interface ParsedAction {
  /** The action to send to the environment ('' when the turn is invalid: a no-op). */
  action: string;
  valid: boolean;
}

export const SHOP_HISTORY_LENGTH = 2;

/** Han, kana and hangul: a turn that drifts into them is invalid. */
export const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]/;

export function skillsBlock(skill: string | undefined): string {
  return skill === undefined ? '' : `[Privileged Skill Information]\n${skill.trim()}\n\n`;
}

export function renderShopPrompt(input: PromptInput, historyLength = SHOP_HISTORY_LENGTH): string {
  const taken = input.history.length;
  const recent = input.history.slice(Math.max(0, taken - historyLength));
  const lines = [`You are an expert agent operating in the WebShop online store.`, `Your task is to: ${input.task}.`];
  if (taken > 0) {
    lines.push(`You have already taken ${taken} step(s). Here are the last ${recent.length} observation(s) and the action you took after each:`);
    recent.forEach((turn, i) => {
      const n = taken - recent.length + i + 1;
      lines.push(`[Observation ${n}: '${turn.observation}', Action ${n}: '${turn.action}']`);
    });
  }
  lines.push(
    `You are now at step ${taken + 1} and your current observation is: ${input.observation}`,
    `Your admissible actions are:\n[\n${input.admissibleActions.map((a) => `'${a}'`).join(',\n')}\n]`,
    '',
    'Think step by step about the page and the shopping goal inside <think> </think> tags, ' +
      'then choose one admissible action and write it inside <action> </action> tags.',
  );
  return skillsBlock(input.skill) + lines.join('\n');
}

/**
 * The action between the first <action> and the next </action>, lower-cased. The turn
 * is invalid when the think or the action tags are missing, or when it holds CJK text.
 */
export function parseActionResponse(response: string): ParsedAction {
  const start = response.indexOf('<action>');
  const end = start < 0 ? -1 : response.indexOf('</action>', start);
  const thinks = response.includes('<think>') && response.includes('</think>');
  if (start < 0 || end < 0 || !thinks || CJK.test(response)) return { action: '', valid: false };
  return { action: response.slice(start + '<action>'.length, end).trim().toLowerCase(), valid: true };
}
