// A whole RL iteration as `train` runs it, at the shapes of a real model: household
// episodes (16 tasks x 8 runs, up to the turn limit, the prompt carrying the history),
// then old log-probs, reference log-probs and the update, with the embedded default's
// recipe. The weights are random, so the policy never finishes a task: every episode
// runs to the turn limit with full-length turns, the heaviest an iteration of that
// recipe gets, and the prompts grow to 1-2K tokens. The tokenizer is the bundled
// model's, widened to the model's vocabulary with filler words, so every id the random
// policy samples decodes to a word that tokenizes back to one token. Beside it, the
// same iteration of the bundled model itself (what `bun run train` trains).
// The last iteration is reported; the first also compiles the pipelines (seconds, against
// minutes for the iteration at 0.5B), so one is the default, to fit a ten-minute job.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Runtime } from '../gpu/runtime.ts';
import type { PromptHistory } from '../rollout/conversation.ts';
import { randomModel, saveModel } from '../models/load.ts';
import { METRICS_FILE } from '../report/run_files.ts';
import { readMetrics, type MetricsRow } from '../report/metrics.ts';
import { loadConfig, runDir } from '../config/config.ts';
import { EMBEDDED_RECIPE } from '../config/default_run.ts';
import { train } from '../trainer/train.ts';
import { benchConfig } from './train_step.ts';
import { profileRows, sectionTimes } from './profile.ts';
import { runTrlPeer, trlPeerRow, type TrlPeerOptions } from './trl_peer.ts';

export const BUNDLED_MODEL = 'models/household-tiny';

export interface RlIterationOptions {
  /** Model shapes (train_step.ts BENCH_MODELS); default qwen05b. */
  preset?: string;
  /** Default 16 tasks x 8 runs, up to 20 turns of 64 tokens (the embedded default). */
  tasks?: number;
  groupSize?: number;
  maxTurns?: number;
  maxResponseTokens?: number;
  /** Iterations run (default 1); the last one is reported. */
  iterations?: number;
  /** The model directory timed beside the bench model (default the bundled one); null: none. */
  bundled?: string | null;
  /** GPU memory budget of the bench model's run in GiB (default 16, the target for a 0.5B model); the bundled run keeps `train`'s default. */
  gpuMemory?: number;
  /** rollout.history (default the recipe's window). */
  history?: PromptHistory;
  /** optim.mergeTurns (default on). */
  mergeTurns?: boolean;
  /** LoRA rank of the bench model's run (alpha twice it, the default target modules); default none: full weights. */
  lora?: number;
  /** Config overrides (key=value, as `train` takes them) applied to both runs after the bench's own. */
  overrides?: string[];
  /** Also run the bundled model's iterations once more under the kernel profiler: GPU time per kernel, rollout and training together. */
  profile?: boolean;
  /** TRL's GRPOTrainer on its own work after ours (trl_peer.ts), and a row with the ratio of the bench model's iteration to it. */
  peer?: TrlPeerOptions;
}

/** Letters-only words with a leading space, one pre-token each under the word tokenizer, that the vocabulary does not hold. */
export function fillerWords(count: number, taken: ReadonlySet<string>): string[] {
  const words: string[] = [];
  for (let i = 0; words.length < count; i++) {
    let s = '';
    let n = i;
    do {
      s = String.fromCharCode(97 + (n % 26)) + s;
      n = Math.floor(n / 26);
    } while (n > 0);
    const word = ` q${s}`;
    if (!taken.has(word)) words.push(word);
  }
  return words;
}

/**
 * Copies a word tokenizer (tokenizer.json, tokenizer_config.json) from `from` to `to`
 * with filler words appended until it has `vocabSize` ids. Returns the special ids the
 * model's config must name.
 */
export function widenTokenizer(from: string, to: string, vocabSize: number): { bos: number; eos: number; pad: number } {
  const json = JSON.parse(fs.readFileSync(path.join(from, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(fs.readFileSync(path.join(from, 'tokenizer_config.json'), 'utf8'));
  const vocab = json.model?.vocab as Record<string, number> | undefined;
  if (!vocab || json.model.type !== 'BPE') throw new Error(`${from}/tokenizer.json: expected a BPE vocabulary (the bundled model's word tokenizer)`);
  const added = json.added_tokens as { id: number; content: string }[];
  const ids = [...Object.values(vocab), ...added.map((t) => t.id)];
  const size = Math.max(...ids) + 1;
  if (vocabSize < size) throw new Error(`widenTokenizer: the model's vocabulary (${vocabSize}) is smaller than the tokenizer's (${size})`);
  fillerWords(vocabSize - size, new Set(Object.keys(vocab))).forEach((word, i) => {
    vocab[word] = size + i;
  });
  fs.mkdirSync(to, { recursive: true });
  fs.writeFileSync(path.join(to, 'tokenizer.json'), JSON.stringify(json));
  fs.writeFileSync(path.join(to, 'tokenizer_config.json'), JSON.stringify(config, null, 2));
  const id = (token: string) => {
    const t = added.find((a) => a.content === token);
    if (!t) throw new Error(`${from}: no special token ${token}`);
    return t.id;
  };
  // Qwen's configs name <|endoftext|> as both bos and pad.
  const pad = id(config.pad_token);
  return { bos: pad, eos: id(config.eos_token), pad };
}

/** A random model of the preset's shapes with the widened bundled tokenizer, written to `dir`. */
async function writeBenchModel(rt: Runtime, preset: string, tokenizerFrom: string, dir: string, work: string): Promise<number> {
  const tokenizerDir = path.join(work, 'tokenizer');
  const special = widenTokenizer(tokenizerFrom, tokenizerDir, benchConfig(preset).vocabSize);
  const config = benchConfig(preset, { bos_token_id: special.bos, eos_token_id: special.eos, pad_token_id: special.pad });
  const model = randomModel(config, 0, { fast: true, trainable: false });
  try {
    await saveModel(model, dir, { tokenizerDir });
    return model.parameters().reduce((s, p) => s + p.size, 0);
  } finally {
    for (const p of model.parameters()) p.dispose();
    rt.pool.trim();
  }
}

const round = (x: number, digits = 2) => +x.toFixed(digits);

/** The report row of the last iteration of a run's metrics. */
export function iterationRow(label: string, rows: readonly MetricsRow[]): object {
  const m = rows[rows.length - 1] as unknown as Record<string, number>;
  if (!m || m['time/step'] === undefined) throw new Error(`rl-iteration: the ${label} run logged no iteration`);
  const scoring = m['time/old_logprobs'] + m['time/reference'] + m['time/teacher'];
  const step = m['time/step'];
  return {
    kind: 'rl_iteration', model: label, iteration: m.iteration,
    episodes: m['rollout/trajectories'], turns: m['rollout/samples'], turns_per_episode: round(m['rollout/episode_len'], 1),
    prompt_tokens_mean: Math.round(m['tokens/prompt'] / Math.max(m['rollout/samples'], 1)), truncated_prompts: m['rollout/truncated_prompts'],
    generated_tokens: m['tokens/generated'], trained_tokens: m['tokens/trained'],
    scored_prompt_tokens: m['tokens/scored_prompt'], episodes_merged: m['episodes/merged'], episodes_per_turn: m['episodes/per_turn'],
    // Prompt tokens each pass ran once for several sequences (PERFORMANCE section 11.1).
    shared_prefix_tokens: Object.fromEntries(['old', 'reference', 'teacher', 'update'].map((p) => [p, m[`tokens/${p}_shared_prefix`] ?? 0])),
    step_s: round(step), rollout_s: round(m['time/rollout']), rollout_engine_s: round(m['time/rollout_generate']),
    scoring_s: round(scoring), update_s: round(m['time/update']), scoring_update_s: round(scoring + m['time/update']),
    rollout_share: round(m['time/rollout'] / step, 3), scoring_share: round(scoring / step, 3), update_share: round(m['time/update'] / step, 3),
    tokens_per_s: Math.round(m['throughput/tokens_per_s']),
    ...Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith('memory/')).map(([k, v]) => [k.slice('memory/'.length), round(v, 3)])),
    // Dispatches, submits and readbacks per phase (gpu/<phase>_<count>), what the host paid beside the arithmetic.
    gpu_counts: Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith('gpu/')).map(([k, v]) => [k.slice('gpu/'.length), v])),
  };
}

export async function benchRlIteration(rt: Runtime, opts: RlIterationOptions = {}): Promise<object[]> {
  const preset = opts.preset ?? 'qwen05b';
  const bundled = opts.bundled === undefined ? BUNDLED_MODEL : opts.bundled;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-iteration-'));
  const overrides = [
    `iterations=${opts.iterations ?? 1}`,
    `rollout.tasksPerIteration=${opts.tasks ?? 16}`,
    `rollout.groupSize=${opts.groupSize ?? 8}`,
    `rollout.maxTurns=${opts.maxTurns ?? 20}`,
    `rollout.maxResponseTokens=${opts.maxResponseTokens ?? 64}`,
    ...(opts.history ? [`rollout.history=${opts.history}`] : []),
    ...(opts.mergeTurns !== undefined ? [`optim.mergeTurns=${opts.mergeTurns}`] : []),
    // One validation episode and one checkpoint at the end are what a run always does; neither is timed.
    'validation.atStart=false', 'validation.every=0', 'validation.tasks=1', 'validation.runs=1', 'checkpoint.every=0', 'checkpoint.keepLast=1',
    `output.dir=${work}`, 'output.tensorboard=false', 'output.trajectories=false', 'output.progress=none',
    ...(opts.overrides ?? []),
  ];
  const time = async (label: string, modelPath: string, extra: object, more: string[] = []): Promise<object> => {
    const cfg = loadConfig(undefined, [...EMBEDDED_RECIPE, ...overrides, ...more, `model.path=${modelPath}`, `output.runName=${label}`]);
    await train(cfg, { log: () => {} });
    // The row's memory is the run's own per phase (memory/<phase>_peak_gib), as metrics.jsonl has it.
    return { ...iterationRow(label, readMetrics(path.join(runDir(cfg), METRICS_FILE))), ...extra };
  };
  try {
    const rows: object[] = [];
    const modelDir = path.join(work, 'model');
    const nparam = await writeBenchModel(rt, preset, bundled ?? BUNDLED_MODEL, modelDir, work);
    const lora = opts.lora ? [`model.lora={"r":${opts.lora},"alpha":${2 * opts.lora}}`] : [];
    const oursOverrides = [`gpu.memory=${opts.gpuMemory ?? 16}`, ...lora];
    const ours = await time(`random-${preset}`, modelDir, { preset, params_m: round(nparam / 1e6, 1), lora_rank: opts.lora ?? 0 }, oursOverrides);
    rows.push(ours);
    if (bundled) rows.push(await time('bundled', bundled, { path: bundled }));
    if (opts.profile && rt.caps.timestampQuery) {
      // Each timed run once more under the kernel profiler, its GPU time per kernel by phase.
      const runs: [string, () => Promise<object>][] = [[`rl-iteration ${preset}`, () => time(`random-${preset}-profiled`, modelDir, {}, oursOverrides)]];
      if (bundled) runs.push([`rl-iteration ${bundled}`, () => time('bundled-profiled', bundled, { path: bundled })]);
      for (const [what, run] of runs) {
        for (const [phase, times] of await sectionTimes(rt, run)) rows.push(...profileRows(`${what} ${phase}`, times, { phase }));
      }
    }
    if (opts.peer) rows.push(trlPeerRow(ours as { step_s: number }, await runTrlPeer(opts.peer)));
    return rows;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
