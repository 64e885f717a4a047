import { defineCommand } from 'citty';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { makeDefaultModel } from '../sft/default_model.ts';
import { envPlugin } from '../../envs/registry.ts';
import { CliError, intArg, numberArg } from './args.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

const DTYPES = { bf16: 'BF16', f16: 'F16', f32: 'F32' } as const;

export const makeDefaultModelCommand = defineCommand({
  meta: {
    name: 'make-default-model',
    description: "Build the bundled household model: word tokenizer, tiny Qwen2, SFT on expert episodes, export, greedy valid_seen eval",
  },
  args: {
    out: { type: 'string', description: 'output checkpoint directory (replaced)', default: 'models/household-tiny' },
    steps: { type: 'string', description: 'optimizer steps', default: '1200' },
    'batch-tokens': { type: 'string', description: 'sequence tokens per step', default: '16384' },
    'micro-batch-tokens': { type: 'string', description: 'padded tokens per forward/backward pass (default: batch-tokens)' },
    lr: { type: 'string', description: 'peak learning rate (linear warmup, cosine to lr/10)', default: '1e-3' },
    warmup: { type: 'string', description: 'warmup steps (default: steps/10, at most 100)' },
    hidden: { type: 'string', description: 'hidden size', default: '256' },
    layers: { type: 'string', description: 'decoder layers', default: '4' },
    heads: { type: 'string', description: 'attention heads', default: '4' },
    'kv-heads': { type: 'string', description: 'key/value heads', default: '2' },
    intermediate: { type: 'string', description: 'MLP size', default: '768' },
    'max-positions': { type: 'string', description: 'max_position_embeddings (prompt + response budget)', default: '2048' },
    episodes: { type: 'string', description: 'train-split expert episodes', default: '5000' },
    'train-seed-start': { type: 'string', description: 'first train seed', default: '0' },
    detour: { type: 'string', description: 'chance per expert turn of a random "go to" detour first (recovery data)', default: String(envPlugin('household').expert!.defaultDetour) },
    'skills-share': { type: 'string', description: 'share of episodes with the skill cards in the prompt, played by an expert that follows them', default: '0.5' },
    'corpus-episodes': { type: 'string', description: 'episodes per split whose text builds the vocabulary', default: '300' },
    seed: { type: 'string', description: 'initialisation and data-order seed', default: '0' },
    dtype: { type: 'string', description: 'stored weights: bf16, f16 or f32', default: 'bf16' },
    'eval-episodes': { type: 'string', description: 'valid_seen episodes for the held-out loss and greedy success (0: none)', default: '50' },
    'eval-max-turns': { type: 'string', description: 'turn cap of the evaluation episodes', default: '50' },
    'max-response-tokens': { type: 'string', description: 'response budget per turn', default: '64' },
    'log-every': { type: 'string', description: 'print a progress line every N steps', default: '20' },
    ...gpuArgs,
  },
  async run({ args, rawArgs }) {
    const dtype = DTYPES[args.dtype as keyof typeof DTYPES];
    if (!dtype) throw new CliError(`--dtype ${args.dtype}: expected one of ${Object.keys(DTYPES).join(', ')}`);
    const shape = {
      hidden: intArg('--hidden', args.hidden, 1),
      layers: intArg('--layers', args.layers, 1),
      heads: intArg('--heads', args.heads, 1),
      kvHeads: intArg('--kv-heads', args['kv-heads'], 1),
      intermediate: intArg('--intermediate', args.intermediate, 1),
      maxPositions: intArg('--max-positions', args['max-positions'], 2),
    };
    if (shape.hidden % shape.heads !== 0) throw new CliError(`--hidden ${shape.hidden} must be a multiple of --heads ${shape.heads}`);
    if (shape.heads % shape.kvHeads !== 0) throw new CliError(`--kv-heads ${shape.kvHeads} must divide --heads ${shape.heads}`);
    if ((shape.hidden / shape.heads) % 2 !== 0) throw new CliError(`head size ${shape.hidden / shape.heads} (--hidden / --heads) must be even for RoPE`);
    const batchTokens = intArg('--batch-tokens', args['batch-tokens'], 1);
    const maxResponseTokens = intArg('--max-response-tokens', args['max-response-tokens'], 1, shape.maxPositions - 1);
    const detour = numberArg('--detour', args.detour, 0);
    if (detour >= 1) throw new CliError(`--detour ${args.detour}: expected a number in [0, 1)`);
    const skillsShare = numberArg('--skills-share', args['skills-share'], 0);
    if (skillsShare > 1) throw new CliError(`--skills-share ${args['skills-share']}: expected a number in [0, 1]`);
    const opts = {
      out: args.out,
      shape,
      episodes: intArg('--episodes', args.episodes, 1),
      trainSeedStart: intArg('--train-seed-start', args['train-seed-start'], 0),
      detour,
      skillsShare,
      corpusEpisodes: intArg('--corpus-episodes', args['corpus-episodes'], 1),
      steps: intArg('--steps', args.steps, 1),
      batchTokens,
      microBatchTokens: args['micro-batch-tokens'] === undefined ? batchTokens : intArg('--micro-batch-tokens', args['micro-batch-tokens'], 1),
      lr: numberArg('--lr', args.lr, 0),
      warmupSteps: args.warmup === undefined ? undefined : intArg('--warmup', args.warmup, 0),
      seed: intArg('--seed', args.seed, 0),
      dtype,
      evalEpisodes: intArg('--eval-episodes', args['eval-episodes'], 0),
      evalMaxTurns: intArg('--eval-max-turns', args['eval-max-turns'], 1),
      maxResponseTokens,
      logEvery: intArg('--log-every', args['log-every'], 1),
      command: ['npx bun run cli make-default-model', ...rawArgs].join(' '),
    };
    await initRuntime(gpuOptions(args));
    try {
      await makeDefaultModel(opts);
    } finally {
      destroyRuntime();
    }
  },
});
