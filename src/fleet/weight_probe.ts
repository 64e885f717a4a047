// Which weights a server holds, read from outside: a short fixed text scored by the
// server (vLLM's prompt_logprobs) and by the trainer, token by token. The same
// weights give the same log-probs up to the two sides' arithmetic (bf16 on a vLLM GPU
// against f32 here: a few hundredths of a nat per token); a server on the base model,
// an earlier step or another run's weights drifts further, the more the further
// training has moved the model. The tolerance is the config's probeTolerance.

import type { CausalLM } from '../models/causal_lm.ts';
import { scoreSequences } from '../scoring/score.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { HttpEngine } from '../engines/http_engine.ts';

/** Ordinary text with the household's words in it, so every model scores it far from uniform. */
export const PROBE_TEXT =
  'You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, a drawer 1 and a fridge 1. ' +
  'Your task is to: put a clean mug in the coffeemachine. Think first, then act: go to countertop 1.';

/** Tokens scored by both sides. */
export const PROBE_TOKENS = 32;

/** The probe as token ids: the first PROBE_TOKENS of PROBE_TEXT (no special tokens). */
export function probeIds(tokenizer: Tokenizer): number[] {
  const ids = tokenizer.encode(PROBE_TEXT, { addSpecialTokens: false }).slice(0, PROBE_TOKENS);
  if (ids.length < 2) throw new Error(`weights probe: the tokenizer makes ${ids.length} token(s) of the probe text; at least 2 are needed`);
  return ids;
}

/** The trainer's log-probs of probe tokens 1..n-1 (temperature 1). */
export async function trainerProbe(model: CausalLM, ids: readonly number[]): Promise<number[]> {
  const [row] = await scoreSequences(model, [ids]);
  return Array.from(row);
}

/** The server's log-probs of probe tokens 1..n-1 under `model` (one request, no recovery hook: it is the check recovery runs). */
export function serverProbe(engine: HttpEngine, ids: readonly number[], model: string): Promise<number[]> {
  return engine.scoreOne({ promptIds: ids.slice(0, 1), completionIds: ids.slice(1) }, model, 1, { guarded: false });
}

/** Mean absolute difference per token. */
export function probeDistance(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length || a.length === 0) throw new Error(`weights probe: ${a.length} log-probs against ${b.length}`);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i] - b[i]);
  return sum / a.length;
}
