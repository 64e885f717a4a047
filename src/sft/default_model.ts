// The bundled default model, made from nothing: a word-level tokenizer over the
// household environment's text, a randomly initialised tiny Qwen2, SFT on the
// expert's train-split episodes, export as a Hugging Face directory, and a greedy
// evaluation of the exported weights on valid_seen with the agent loop. The output
// directory gets a README.md model card with the command and the measured numbers.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';
import { tempPath } from '../util/atomic_file.ts';
import { envPlugin, getEnvironment } from '../../envs/registry.ts';
import type { ExpertData, ExpertTurn } from '../envs/plugin.ts';
import type { StorageDType } from '../safetensors/writer.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { loadModel, randomModel, saveModel } from '../models/load.ts';
import { configFromPreset } from '../hf_model/presets.ts';
import { loadTokenizer, type Tokenizer } from '../tokenizer/tokenizer.ts';
import { buildWordTokenizer, END_OF_TEXT, IM_END, writeTokenizerFiles } from '../tokenizer/word_tokenizer.ts';
import { runRollout, type RolloutStats } from '../rollout/agent_loop.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { encodeTurnPrompt } from '../rollout/tokenize_turn.ts';
import { formatSftStep, sftLoss, trainSft, type SftSample, type SftStepStats } from './sft.ts';

export interface ModelShape {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  intermediate: number;
  maxPositions: number;
}

export interface DefaultModelOptions {
  out: string;
  shape: ModelShape;
  /** Train-split expert episodes (seeds trainSeedStart ...). */
  episodes: number;
  trainSeedStart: number;
  /** Chance of a detour per expert turn (see envs/household/expert_data.ts). */
  detour: number;
  /** Share of episodes played with the skill cards in the prompt by an expert that follows them. */
  skillsShare: number;
  /** Episodes per split whose text builds the vocabulary. */
  corpusEpisodes: number;
  steps: number;
  batchTokens: number;
  microBatchTokens: number;
  lr: number;
  warmupSteps?: number;
  /** Weight initialisation and data order. */
  seed: number;
  dtype: StorageDType;
  /** valid_seen episodes for the held-out loss and the greedy evaluation (0 skips both). */
  evalEpisodes: number;
  evalMaxTurns: number;
  maxResponseTokens: number;
  logEvery: number;
  /** The command line, written into the model card. */
  command: string;
}

export interface DefaultModelSummary {
  out: string;
  vocabSize: number;
  parameters: number;
  /** Bytes of the safetensors file(s) written. */
  weightBytes: number;
  trainSamples: number;
  meanPromptTokens: number;
  maxPromptTokens: number;
  meanResponseTokens: number;
  initialLoss: number;
  finalLoss: number;
  /** Held-out (valid_seen expert) loss after training; null when evalEpisodes is 0. */
  validLoss: number | null;
  trainSeconds: number;
  tokensPerSecond: number;
  /** Greedy valid_seen episodes without and with the skills block in the prompt. */
  eval: { plain: RolloutStats; skills: RolloutStats } | null;
}

export function qwen2Config(shape: ModelShape, vocabSize: number, tokenizer: Tokenizer): ModelConfig {
  const eos = tokenizer.tokenToId(IM_END);
  const eot = tokenizer.tokenToId(END_OF_TEXT);
  return configFromPreset('qwen2.5-0.5b', {
    vocab_size: vocabSize,
    hidden_size: shape.hidden,
    intermediate_size: shape.intermediate,
    num_hidden_layers: shape.layers,
    max_window_layers: shape.layers,
    num_attention_heads: shape.heads,
    num_key_value_heads: shape.kvHeads,
    max_position_embeddings: shape.maxPositions,
    sliding_window: shape.maxPositions,
    rope_theta: 10000,
    tie_word_embeddings: true,
    bos_token_id: eot,
    eos_token_id: eos,
    pad_token_id: eot,
  });
}

/** Prompt ids exactly as the agent loop builds them, and the response closed by <|im_end|>. */
export function encodeSample(tokenizer: Tokenizer, s: ExpertTurn, maxPromptTokens: number): SftSample {
  const end = tokenizer.tokenToId(IM_END);
  if (end === undefined) throw new Error(`encodeSample: the tokenizer has no ${IM_END} token`);
  return {
    promptIds: encodeTurnPrompt(tokenizer, s.prompt, maxPromptTokens, false).ids,
    responseIds: [...tokenizer.encode(s.response, { addSpecialTokens: false }), end],
  };
}

/** The household plugin's expert demonstrations, which the bundled model is made of. */
function householdExpert(): ExpertData {
  const expert = envPlugin('household').expert;
  if (!expert) throw new Error('make-default-model: the household environment writes no expert demonstrations');
  return expert;
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}

function sizeOf(dir: string): number {
  return storage().list(dir).filter((f) => f.endsWith('.safetensors')).reduce((n, f) => n + storage().stat(path.join(dir, f))!.size, 0);
}

export async function makeDefaultModel(o: DefaultModelOptions, log: (line: string) => void = console.log): Promise<DefaultModelSummary> {
  const t0 = performance.now();
  const since = () => `${((performance.now() - t0) / 1000).toFixed(1)}s`;
  const tokDir = tempPath(path.join(hostProcess().tempDir, 'wgt-tokenizer'));
  storage().makeDir(tokDir);
  try {
    const files = buildWordTokenizer(householdExpert().corpus(o.corpusEpisodes), { modelMaxLength: o.shape.maxPositions });
    writeTokenizerFiles(tokDir, files);
    const tokenizer = await loadTokenizer(tokDir);
    log(`tokenizer: ${files.vocabSize} tokens (${files.words} words) from ${o.corpusEpisodes} episodes per split [${since()}]`);

    const maxPrompt = o.shape.maxPositions - o.maxResponseTokens;
    const encode = (samples: Iterable<ExpertTurn>) => [...samples].map((s) => encodeSample(tokenizer, s, maxPrompt));
    const trainText = [...householdExpert().samples({ split: 'train', seeds: range(o.trainSeedStart, o.episodes), detour: o.detour, skillsShare: o.skillsShare, rngSeed: o.seed })];
    const train = encode(trainText);
    const valid = o.evalEpisodes > 0 ? encode(householdExpert().samples({ split: 'valid_seen', seeds: range(0, o.evalEpisodes), skillsShare: o.skillsShare })) : [];
    const promptLens = train.map((s) => s.promptIds.length);
    const meanPrompt = promptLens.reduce((a, b) => a + b, 0) / train.length;
    const meanResponse = train.reduce((n, s) => n + s.responseIds.length, 0) / train.length;
    const withSkills = trainText.filter((s) => s.withSkills).length;
    log(`data: ${train.length} train samples from ${o.episodes} episodes, ${withSkills} with the skills block (prompt mean ${meanPrompt.toFixed(0)}, max ${Math.max(...promptLens)} tokens; response mean ${meanResponse.toFixed(1)}), ${valid.length} valid_seen samples [${since()}]`);

    const config = qwen2Config(o.shape, files.vocabSize, tokenizer);
    const model = randomModel(config, o.seed);
    const parameters = model.parameters().reduce((n, p) => n + p.size, 0);
    log(`model: qwen2 hidden ${o.shape.hidden}, ${o.shape.layers} layers, ${o.shape.heads} heads (${o.shape.kvHeads} kv), intermediate ${o.shape.intermediate}, vocab ${files.vocabSize}: ${parameters} parameters`);
    let result: Awaited<ReturnType<typeof trainSft>>;
    let validLoss: number | null = null;
    try {
      result = await trainSft(model, train, {
        steps: o.steps, batchTokens: o.batchTokens, microBatchTokens: o.microBatchTokens, lr: o.lr, warmupSteps: o.warmupSteps, seed: o.seed,
        onStep: (s: SftStepStats) => {
          if (s.step === 1 || s.step % o.logEvery === 0 || s.step === s.steps) log(formatSftStep(s));
        },
      });
      if (valid.length > 0) {
        validLoss = await sftLoss(model, valid, o.microBatchTokens);
        log(`valid_seen expert loss ${validLoss.toFixed(4)} [${since()}]`);
      }
      await saveModel(model, o.out, { tokenizerDir: tokDir, dtype: o.dtype, generationConfig: generationConfig(config) });
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
    const weightBytes = sizeOf(o.out);
    log(`exported ${o.out}: ${(weightBytes / 2 ** 20).toFixed(2)} MiB of ${o.dtype} weights [${since()}]`);

    const evalStats = o.evalEpisodes > 0 ? await evaluate(o, log) : null;
    const summary: DefaultModelSummary = {
      out: o.out,
      vocabSize: files.vocabSize,
      parameters,
      weightBytes,
      trainSamples: train.length,
      meanPromptTokens: meanPrompt,
      maxPromptTokens: Math.max(...promptLens),
      meanResponseTokens: meanResponse,
      initialLoss: result.losses[0],
      finalLoss: result.losses[result.losses.length - 1],
      validLoss,
      trainSeconds: result.seconds,
      tokensPerSecond: result.stats[result.stats.length - 1].tokensPerSecond,
      eval: evalStats,
    };
    storage().writeAtomic(path.join(o.out, 'README.md'), modelCard(o, summary));
    log(`done [${since()}]`);
    return summary;
  } finally {
    storage().remove(tokDir);
  }
}

function generationConfig(cfg: ModelConfig): Record<string, unknown> {
  // Generation ends at <|im_end|> (the end of an assistant turn) or <|endoftext|>.
  const eos = [...new Set([...cfg.eosTokenIds, ...(cfg.padTokenId === null ? [] : [cfg.padTokenId])])];
  return { bos_token_id: cfg.bosTokenId, eos_token_id: eos, pad_token_id: cfg.padTokenId };
}

/**
 * Greedy episodes of the exported model (reloaded from disk, so the stored dtype is
 * what is measured), without and with the skills block in its prompt.
 */
async function evaluate(o: DefaultModelOptions, log: (line: string) => void): Promise<{ plain: RolloutStats; skills: RolloutStats }> {
  const model = loadModel(o.out, { trainable: false });
  try {
    const tokenizer = await loadTokenizer(o.out);
    const engine = new LocalEngine(model, { tokenizer, path: o.out, maxBatch: o.evalEpisodes });
    const play = async (skills: boolean): Promise<RolloutStats> => {
      const { stats } = await runRollout({
        env: getEnvironment('household'),
        spec: envPlugin('household').agent,
        engine,
        tokenizer,
        tasks: range(0, o.evalEpisodes).map((seed) => ({ split: 'valid_seen' as const, seed })),
        groupSize: 1,
        sampling: { temperature: 0 },
        maxPromptTokens: o.shape.maxPositions - o.maxResponseTokens,
        maxResponseTokens: o.maxResponseTokens,
        maxTurns: o.evalMaxTurns,
        withSkills: skills ? 'policy' : 'none',
      });
      const byType = Object.entries(stats.successByType).map(([t, s]) => `${t} ${s.won}/${s.trajectories}`).join(', ');
      log(`valid_seen greedy${skills ? ' with skills' : ''}: success ${(100 * stats.successRate).toFixed(1)}% of ${stats.completed} (${byType}); invalid actions ${(100 * stats.invalidActionRate).toFixed(1)}%, mean length ${stats.meanEpisodeLength.toFixed(1)} turns, ${stats.wallSeconds.toFixed(1)}s`);
      return stats;
    };
    return { plain: await play(false), skills: await play(true) };
  } finally {
    for (const p of model.parameters()) p.dispose();
  }
}

function modelCard(o: DefaultModelOptions, s: DefaultModelSummary): string {
  const e = s.eval;
  const lines = [
    `# ${path.basename(path.resolve(o.out))}`,
    '',
    'A tiny Qwen2-architecture model trained from scratch by this project (supervised fine-tuning on the household',
    "environment's searching-expert episodes, envs/household/searcher.ts), bundled so that the trainer works with no",
    'downloads. It is a starting point for RL on the household environment, not a general language model: its',
    "word-level tokenizer knows only the household environment's vocabulary (other text is spelled out in",
    'characters and bytes).',
    '',
    'Reproduce:',
    '',
    '```',
    o.command,
    '```',
    '',
    '| | |',
    '|---|---|',
    `| shape | hidden ${o.shape.hidden}, ${o.shape.layers} layers, ${o.shape.heads} heads (${o.shape.kvHeads} kv), intermediate ${o.shape.intermediate}, tied embeddings |`,
    `| parameters | ${s.parameters} (${(s.weightBytes / 2 ** 20).toFixed(2)} MiB ${o.dtype}) |`,
    `| vocabulary | ${s.vocabSize} tokens |`,
    `| data | ${s.trainSamples} turns of ${o.episodes} train-split searching-expert episodes (seeds ${o.trainSeedStart}-${o.trainSeedStart + o.episodes - 1}, detour ${o.detour}); ${Math.round(100 * o.skillsShare)}% of the episodes with the skills block in the prompt, played by an expert that searches where the cards say things are kept |`,
    `| prompt tokens | mean ${s.meanPromptTokens.toFixed(0)}, max ${s.maxPromptTokens} |`,
    `| training | ${o.steps} steps of ${o.batchTokens} tokens, lr ${o.lr} (warmup, cosine), seed ${o.seed}; ${s.trainSeconds.toFixed(0)} s |`,
    `| loss | ${s.initialLoss.toFixed(3)} -> ${s.finalLoss.toFixed(3)} (response tokens) |`,
  ];
  if (s.validLoss !== null) lines.push(`| valid_seen expert loss | ${s.validLoss.toFixed(3)} |`);
  if (e) {
    const row = (label: string, r: RolloutStats) =>
      `| valid_seen greedy success, ${label} | ${(100 * r.successRate).toFixed(1)}% of ${r.completed} episodes (max ${o.evalMaxTurns} turns; mean ${r.meanEpisodeLength.toFixed(1)} turns, invalid actions ${(100 * r.invalidActionRate).toFixed(1)}%) |`;
    lines.push(row('without skills', e.plain), row('with the skills block', e.skills));
  }
  return lines.join('\n') + '\n';
}
