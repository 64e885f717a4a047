// Thinking mode: how a chat template with Qwen3's `enable_thinking` switch frames a
// turn's reasoning. The config's choice (model.thinking) is passed to the template as
// transformers passes it; what the template then does with the generation prompt is
// read from the template itself, by rendering it, so any template with the switch
// (Qwen3's empty pre-filled block, Qwen3.5's opened one) is handled the same way.

import type { Tokenizer } from './tokenizer.ts';

export const THINKING_MODES = ['off', 'on', 'default'] as const;
/** off: enable_thinking=false; on: enable_thinking=true; default: not passed, the template's own default. */
export type ThinkingMode = (typeof THINKING_MODES)[number];

/**
 * Where a response's reasoning goes for a template and mode, which the environment
 * prompts follow: 'tags' the template has no thinking switch, and the prompt asks for
 * <think> </think> tags in the answer (the reference's format); 'native' the model
 * thinks in its template's own think block; 'none' thinking is switched off, and the
 * template has already closed an empty block, so the answer carries no reasoning block.
 */
export type ReasoningFormat = 'tags' | 'native' | 'none';

export interface ThinkingFormat {
  mode: ThinkingMode;
  /** The enable_thinking value passed to the template; undefined leaves it out. */
  enableThinking: boolean | undefined;
  reasoning: ReasoningFormat;
  /** What the generation prompt opens and the response continues ('<think>\n' for Qwen3.5 thinking), '' when nothing. */
  opened: string;
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';

export function enableThinkingOf(mode: ThinkingMode): boolean | undefined {
  return mode === 'off' ? false : mode === 'on' ? true : undefined;
}

/** A think block the text opens and does not close, from its opening tag on; '' when none. */
function openBlock(text: string): string {
  const at = text.lastIndexOf(THINK_OPEN);
  return at >= 0 && !text.includes(THINK_CLOSE, at) ? text.slice(at) : '';
}

/** The thinking format of `tokenizer`'s template under `mode`, found by rendering a one-message chat with the switch off, on and absent. */
export function thinkingFormat(tokenizer: Tokenizer, mode: ThinkingMode): ThinkingFormat {
  const probe = [{ role: 'user', content: 'x' }];
  const render = (enableThinking: boolean | undefined) =>
    tokenizer.applyChatTemplate(probe, { addGenerationPrompt: true, ...(enableThinking === undefined ? {} : { enableThinking }) });
  const off = render(false);
  const on = render(true);
  const enableThinking = enableThinkingOf(mode);
  const prompt = mode === 'off' ? off : mode === 'on' ? on : render(undefined);
  const reasoning: ReasoningFormat = off === on ? 'tags' : prompt === on ? 'native' : 'none';
  return { mode, enableThinking, reasoning, opened: reasoning === 'native' ? openBlock(prompt) : '' };
}
