import { defineCommand } from 'citty';
import { benchDispatch } from '../bench/dispatch.ts';
import { benchGenerate } from '../bench/generate.ts';
import { benchAttention, benchLoss } from '../bench/kernels.ts';
import { benchDecodeMatmul, benchMatmul } from '../bench/matmul.ts';
import { benchProfile } from '../bench/profile.ts';
import { benchRlIteration } from '../bench/rl_iteration.ts';
import { benchRollout } from '../bench/rollout.ts';
import type { TrlPeerOptions } from '../bench/trl_peer.ts';
import { benchQwen35 } from '../bench/qwen35_step.ts';
import { benchTrainStep } from '../bench/train_step.ts';
import { destroyRuntime, initRuntime, type Runtime } from '../gpu/runtime.ts';
import type { PromptHistory } from '../rollout/conversation.ts';
import { CliError, intArg } from './args.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

type Suite = (rt: Runtime, args: Record<string, unknown>) => Promise<object[]>;

const presetOf = (args: Record<string, unknown>) => (args.preset as string | undefined) ?? 'qwen05b';
/** A numeric option, or undefined when not given so each suite keeps its own default. */
const numberOf = (v: unknown) => (v === undefined || v === '' ? undefined : Number(v));

/** A positive integer, or undefined when not given. */
const countOf = (flag: string, v: unknown) => (v === undefined ? undefined : intArg(`--${flag}`, String(v), 1));

/** A comma-separated list of positive integers, or undefined when not given. */
function listOf(flag: string, v: unknown): number[] | undefined {
  if (v === undefined) return undefined;
  return String(v).split(',').map((item) => intArg(`--${flag}`, item.trim(), 1));
}

function historyOf(v: unknown): PromptHistory | undefined {
  if (v === undefined || v === 'window' || v === 'conversation') return v;
  throw new Error(`bench: --history must be window or conversation, got ${v}`);
}

function switchOf(name: string, v: unknown): boolean | undefined {
  if (v === undefined) return undefined;
  if (v === 'on' || v === 'off') return v === 'on';
  throw new Error(`bench: --${name} must be on or off, got ${v}`);
}

/** --trl and its settings, or undefined without --trl. */
function trlPeerOf(args: Record<string, unknown>): TrlPeerOptions | undefined {
  if (args.trl === undefined) {
    if (args['trl-tokenizer'] !== undefined || args['trl-variant'] !== undefined) throw new CliError('bench: --trl-tokenizer and --trl-variant go with --trl SCRIPT');
    return undefined;
  }
  if (typeof args['trl-tokenizer'] !== 'string') throw new CliError('bench: --trl needs --trl-tokenizer, the Qwen tokenizer.json its script reads');
  return { script: String(args.trl), tokenizer: args['trl-tokenizer'], variant: args['trl-variant'] as string | undefined };
}

const suites: Record<string, Suite> = {
  dispatch: (rt) => benchDispatch(rt),
  matmul: (rt) => benchMatmul(rt),
  'decode-matmul': (rt, args) => benchDecodeMatmul(rt, listOf('rows', args.rows)),
  attention: (rt) => benchAttention(rt),
  loss: (rt) => benchLoss(rt),
  train: (rt, args) => benchTrainStep(rt, presetOf(args), { batch: numberOf(args.batch), seq: numberOf(args.seq) }),
  generate: (rt, args) => benchGenerate(rt, presetOf(args), { batches: listOf('decode-batches', args['decode-batches']) }),
  profile: (rt, args) => benchProfile(rt, presetOf(args), {
    batch: numberOf(args.batch), seq: numberOf(args.seq), batches: listOf('decode-batches', args['decode-batches']),
    promptTokens: countOf('prompt-tokens', args['prompt-tokens']), newTokens: countOf('new-tokens', args['new-tokens']),
  }),
  rollout: (rt, args) => benchRollout(rt, {
    model: args.model as string | undefined, tasks: numberOf(args.tasks), groupSize: numberOf(args['group-size']),
    maxTurns: numberOf(args['max-turns']), maxResponseTokens: numberOf(args['max-response-tokens']),
  }),
  'rl-iteration': (rt, args) => benchRlIteration(rt, {
    preset: args.preset as string | undefined, tasks: numberOf(args.tasks), groupSize: numberOf(args['group-size']),
    maxTurns: numberOf(args['max-turns']), maxResponseTokens: numberOf(args['max-response-tokens']), iterations: numberOf(args.iters),
    gpuMemory: numberOf(args['gpu-memory']), history: historyOf(args.history), mergeTurns: switchOf('merge-turns', args['merge-turns']),
    lora: countOf('lora', args.lora), profile: args.profile === true, peer: trlPeerOf(args), overrides: args.set === undefined ? undefined : String(args.set).split(/\s+/).filter(Boolean),
  }),
  qwen35: (rt, args) => benchQwen35(rt, (args.preset as string | undefined) ?? '2b', {
    batch: numberOf(args.batch), seq: numberOf(args.seq), warmup: numberOf(args.warmup), iters: numberOf(args.iters),
  }),
};

/** The suites --only names. */
export const BENCH_SUITES: readonly string[] = Object.keys(suites);

/** Suites that run only when --only names them (minutes each at full size). */
const OPT_IN = new Set(['rl-iteration']);

export const benchCommand = defineCommand({
  meta: { name: 'bench', description: 'Benchmark kernels and steps on this GPU; prints JSON lines' },
  args: {
    only: { type: 'string', description: `comma-separated suites (${Object.keys(suites).join(', ')}); without it, all but ${[...OPT_IN].join(', ')}` },
    batch: { type: 'string', description: 'batch size for train and profile (default 8) and qwen35 (default 4)' },
    seq: { type: 'string', description: 'sequence length for train and profile (default 512) and qwen35 (default 1024)' },
    rows: { type: 'string', description: 'decode-matmul: comma-separated row counts (default 1,8,32,64)' },
    'decode-batches': { type: 'string', description: 'profile and generate: comma-separated rows of the decoding runs (default 1,32)' },
    'prompt-tokens': { type: 'string', description: 'profile: prompt tokens of each decoding row (default 128)' },
    'new-tokens': { type: 'string', description: 'profile: tokens each decoding row generates (default 32)' },
    warmup: { type: 'string', description: 'qwen35 warm-up steps (default 1)' },
    iters: { type: 'string', description: 'qwen35 timed steps (default 3); rl-iteration iterations, the last reported (default 1)' },
    tasks: { type: 'string', description: 'rl-iteration: tasks an iteration (default 16); rollout: tasks (default 8)' },
    'group-size': { type: 'string', description: 'rl-iteration and rollout: runs of each task (default 8)' },
    'max-turns': { type: 'string', description: 'rl-iteration: the turn limit (default 20); rollout (default 30)' },
    'max-response-tokens': { type: 'string', description: 'rl-iteration and rollout: tokens a turn (default 64)' },
    history: { type: 'string', description: 'rl-iteration: rollout.history, window (default) or conversation (one growing chat, whose turns can train as one sequence)' },
    'merge-turns': { type: 'string', description: 'rl-iteration: optim.mergeTurns, on (default) or off (one sequence per turn)' },
    lora: { type: 'string', description: 'rl-iteration: train the bench model through LoRA adapters of this rank (alpha twice it) instead of its full weights' },
    trl: { type: 'string', description: 'rl-iteration: TRL\'s GRPOTrainer on its own work after ours, from this script (../shared/bench/trl_grpo.py), and a row with the ratio' },
    'trl-tokenizer': { type: 'string', description: 'rl-iteration with --trl: the Qwen tokenizer.json the script reads' },
    'trl-variant': { type: 'string', description: 'rl-iteration with --trl: the script\'s --variant (default: default, no reference model; beta beside a run with KL; lora beside --lora)' },
    profile: { type: 'boolean', description: 'rl-iteration: run each timed iteration again under the kernel profiler and print GPU time per kernel for each phase (rollout, old log-probs, teacher, reference, update)' },
    set: { type: 'string', description: 'rl-iteration: config overrides as train takes them, space-separated (e.g. "algorithm.klCoef=0 algorithm.entropyCoef=0")' },
    model: { type: 'string', description: 'rollout: the model directory (default models/household-tiny, 8 household tasks x 8, up to 30 turns)' },
    'flush-every': { type: 'string', description: 'dispatches recorded per submit once the GPU is busy (the runtime default is 64; the first submits after it runs dry take 4, 8, 16, ...)' },
    preset: {
      type: 'string',
      description: 'model shapes: train/generate/profile/rl-iteration qwen05b (Qwen2.5-0.5B, default), qwen15b (Qwen2.5-1.5B), small (12.6M) or household (the bundled model\'s shapes); qwen35 2b (Qwen3.5-2B, default) or small (2 tiny layers)',
    },
    ...gpuArgs,
  },
  async run({ args }) {
    const names = args.only ? args.only.split(',').map((s) => s.trim()) : Object.keys(suites).filter((n) => !OPT_IN.has(n));
    for (const n of names) if (!suites[n]) throw new Error(`bench: unknown suite "${n}" (have ${Object.keys(suites).join(', ')})`);
    const rt = await initRuntime(gpuOptions(args));
    const flushEvery = numberOf(args['flush-every']);
    if (flushEvery !== undefined) {
      if (!Number.isInteger(flushEvery) || flushEvery < 1) throw new Error(`bench: --flush-every must be a positive integer, got ${args['flush-every']}`);
      rt.autoFlush = flushEvery;
    }
    console.log(JSON.stringify({ kind: 'device', adapter: rt.gpu.description, runtime: rt.gpu.runtime, caps: rt.gpu.caps }));
    for (const n of names) {
      for (const row of await suites[n](rt, args)) console.log(JSON.stringify(row));
    }
    destroyRuntime();
  },
});
