// The bundled model's making: the word tokenizer round-trips real household prompts and
// expert answers (the action parser reads decoded text), SFT masks cover exactly the
// response tokens and its loss falls, and make-default-model runs end to end into a
// directory that loadModel and loadTokenizer read back.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseAction } from '../envs/household/index.ts';
import { openCheckpoint } from '../src/hf_model/checkpoint.ts';
import { loadModel, randomModel } from '../src/models/load.ts';
import { packLeft, responsePositions } from '../src/scoring/score.ts';
import { loadTokenizer, type Tokenizer } from '../src/tokenizer/tokenizer.ts';
import { buildWordTokenizer, byteToken, IM_END, preTokenize, writeTokenizerFiles } from '../src/tokenizer/word_tokenizer.ts';
import { turnPromptText } from '../src/rollout/tokenize_turn.ts';
import { encodeSample, qwen2Config } from '../src/sft/default_model.ts';
import { expertThought, householdCorpus, householdExpertSamples } from '../envs/household/expert_data.ts';
import { microBatches, sampleIds, sftLoss, trainSft, type SftSample } from '../src/sft/sft.ts';
import { gpu } from './support/gpu.ts';

const root = mkdtempSync(join(tmpdir(), 'wgt-sft-'));
after(() => rmSync(root, { recursive: true, force: true }));

let tokenizerPromise: Promise<Tokenizer> | null = null;
/** A tokenizer built from a few episodes of every split (as make-default-model does, smaller). */
function householdTokenizer(): Promise<Tokenizer> {
  tokenizerPromise ??= (async () => {
    const dir = join(root, 'tokenizer');
    writeTokenizerFiles(dir, buildWordTokenizer(householdCorpus(20)));
    return loadTokenizer(dir);
  })();
  return tokenizerPromise;
}

// The software GPU is slow and shared: GPU tests get minutes, not bun's default 5 s.
const slow = { timeout: 300_000 };

const TINY = { hidden: 32, layers: 1, heads: 2, kvHeads: 1, intermediate: 48, maxPositions: 2048 };

describe('word tokenizer', () => {
  test('pre-tokenizes tags, words, digits and punctuation the way the tokenizer does', () => {
    assert.deepEqual(preTokenize("<think>\nGo to cabinet 12.</think> <action>take x</action>"), [
      '<think>', '\n', 'Go', ' to', ' cabinet', ' 1', '2', '.', '</think>', ' <action>', 'take', ' x', '</action>',
    ]);
  });

  test('round-trips prompts and expert answers of unseen seeds in every split', slow, async () => {
    const tok = await householdTokenizer();
    for (const split of ['train', 'valid_seen', 'valid_unseen'] as const) {
      const samples = [...householdExpertSamples({ split, seeds: [900, 901], detour: 0.3, skillsShare: 0.5 })];
      assert.ok(samples.length > 10, `${split}: ${samples.length} samples`);
      for (const s of samples) {
        const ids = tok.encode(s.prompt, { addSpecialTokens: false });
        assert.equal(tok.decode(ids), s.prompt);
        // Word-level: far fewer tokens than characters, and no byte tokens for household text.
        assert.ok(ids.length * 2 < s.prompt.length, `${ids.length} tokens for ${s.prompt.length} characters`);
        assert.ok(ids.every((id) => id >= 256), 'a household prompt needed byte fallback');
        const templated = tok.applyChatTemplate([{ role: 'user', content: s.prompt }], { addGenerationPrompt: true, tokenize: true });
        assert.equal(tok.decode(templated), turnPromptText(tok, s.prompt, false));
        const response = tok.decode(tok.encode(s.response, { addSpecialTokens: false }));
        assert.equal(response, s.response);
        const parsed = parseAction(response);
        assert.ok(parsed.valid, response);
        assert.equal(parsed.action, s.response.match(/<action>(.*)<\/action>/)![1]);
      }
    }
  });

  test('any text encodes, through characters and UTF-8 bytes, and decodes back', async () => {
    const tok = await householdTokenizer();
    const text = 'Zebra  qux\t€ 日本 <think>\u00e9</think>\n\n<action>go to cabinet 107</action>';
    const ids = tok.encode(text, { addSpecialTokens: false });
    assert.equal(tok.decode(ids), text);
    assert.ok(ids.includes(tok.tokenToId(byteToken(0xe2))!), 'the euro sign falls back to bytes');
  });

  test('ChatML special tokens: <|im_end|> ends a turn and is the eos; <|endoftext|> pads', async () => {
    const tok = await householdTokenizer();
    const text = turnPromptText(tok, 'look', false);
    assert.equal(text, '<|im_start|>user\nlook<|im_end|>\n<|im_start|>assistant\n');
    const ids = tok.applyChatTemplate([{ role: 'user', content: 'look' }], { addGenerationPrompt: true, tokenize: true });
    assert.equal(ids.length, 9, 'specials, roles, words and newlines are one token each');
    assert.deepEqual(tok.eosTokenIds, [tok.tokenToId(IM_END)]);
    assert.equal(tok.padTokenId, tok.tokenToId('<|endoftext|>'));
    assert.equal(tok.decode(ids, { skipSpecialTokens: true }), 'user\nlook\nassistant\n');
  });
});

describe('expert data', () => {
  test('every sample answers with an admissible expert action after a short thought', () => {
    const samples = [...householdExpertSamples({ split: 'train', seeds: [0, 1, 2, 3, 4, 5] })];
    for (const s of samples) {
      const parsed = parseAction(s.response);
      assert.ok(parsed.valid);
      assert.ok(s.prompt.includes(`'${parsed.action}'`), 'the action is admissible');
      const thought = s.response.match(/<think>\n(.*)\n<\/think>/)![1];
      assert.ok(thought.split(' ').length <= 24, thought);
    }
    // Turns count up from 0 within each episode.
    assert.deepEqual(samples.filter((s) => s.seed === 0).map((s) => s.turn), samples.filter((s) => s.seed === 0).map((_, i) => i));
  });

  test('detours are history, not samples, and the expert recovers from them', () => {
    const plain = [...householdExpertSamples({ split: 'train', seeds: [7, 8, 9] })];
    const detoured = [...householdExpertSamples({ split: 'train', seeds: [7, 8, 9], detour: 0.5, maxDetours: 2, rngSeed: 3 })];
    // A detour is a turn of the episode with no sample: turn numbers skip it.
    const skipped = (seed: number) => detoured.filter((s) => s.seed === seed).some((s, i) => s.turn !== i);
    assert.ok([7, 8, 9].some(skipped), 'some turns were detours');
    assert.ok(detoured.length >= plain.length);
    assert.ok(detoured.at(-1)!.response.includes('<action>'));
  });

  test('thoughts follow the state', () => {
    const w = {
      task: { type: 'pick_heat_then_place', object: 'apple', target: 'countertop', sentence: '' },
      holding: 'apple 1', at: 'fridge 1',
      items: [{ name: 'apple 1', type: 'apple', in: null, hot: false, cool: false, clean: false }],
    } as never;
    assert.equal(expertThought(w, 'go to microwave 1'), 'I need to heat the apple 1, so I will go to the microwave 1.');
    assert.equal(expertThought(w, 'heat apple 1 with microwave 1'), 'I will heat the apple 1 with the microwave 1.');
  });
});

describe('SFT', () => {
  test('the loss positions are exactly the response tokens of each left-padded row', () => {
    const samples: SftSample[] = [
      { promptIds: [1, 2, 3, 4, 5], responseIds: [10, 11] },
      { promptIds: [6, 7], responseIds: [12, 13, 14] },
      { promptIds: [8], responseIds: [15] },
    ];
    const packed = packLeft(samples.map(sampleIds));
    const positions = responsePositions(packed, samples);
    assert.deepEqual([...positions].map((i) => packed.targets[i]), [10, 11, 12, 13, 14, 15]);
    // Row b's positions lie in row b: [b * (seq - 1), (b + 1) * (seq - 1)).
    assert.deepEqual([...positions].map((i) => Math.floor(i / (packed.seq - 1))), [0, 0, 1, 1, 1, 2]);
    assert.deepEqual(microBatches(samples, 10).map((g) => g.length), [2, 1]);
    assert.deepEqual(microBatches(samples, 1).map((g) => g.length), [1, 1, 1], 'a sample over the budget goes alone');
  });

  test('the response loss falls on household samples; micro-batching does not change it', slow, async () => {
    await gpu();
    const tok = await householdTokenizer();
    // Short left-truncated prompts keep the software GPU quick; the response is whole.
    const samples = [...householdExpertSamples({ split: 'train', seeds: [11] })].slice(0, 3).map((s) => encodeSample(tok, s, 24));
    const cfg = qwen2Config(TINY, tok.vocabSize, tok);
    const total = samples.reduce((n, s) => n + s.promptIds.length + s.responseIds.length, 0);
    const model = randomModel(cfg, 5);
    const before = await sftLoss(model, samples);
    const split = await sftLoss(model, samples, 40);
    assert.ok(Math.abs(before - split) < 1e-4, `whole ${before} vs micro-batched ${split}`);
    assert.ok(Math.abs(before - Math.log(tok.vocabSize)) < 0.5, `a random model's loss ${before} is near ln(vocab)`);
    const result = await trainSft(model, samples, { steps: 6, batchTokens: total, microBatchTokens: 80, lr: 1e-2, warmupSteps: 1 });
    assert.equal(result.losses.length, 6);
    assert.ok(Math.abs(result.losses[0] - before) < 1e-4, `first step's loss ${result.losses[0]} is the loss before training ${before}`);
    assert.ok(result.stats.every((s) => s.sequences === 3 && s.microBatches > 1 && !s.skipped));
    const after = await sftLoss(model, samples);
    assert.ok(after < before - 1, `loss ${before} -> ${after}`);
    assert.ok(result.losses[5] < result.losses[0]);
    for (const p of model.parameters()) p.dispose();
  });
});

describe('make-default-model', () => {
  test('runs end to end with a tiny config; the export loads with loadModel and loadTokenizer', slow, async () => {
    await gpu();
    const out = join(root, 'household-tiny');
    const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;
    const run = spawnSync(process.execPath, [
      cli, 'make-default-model', '--out', out, '--hidden', '32', '--layers', '1', '--heads', '2', '--kv-heads', '1', '--intermediate', '48',
      '--steps', '2', '--batch-tokens', '600', '--episodes', '1', '--corpus-episodes', '2', '--eval-episodes', '1', '--eval-max-turns', '1',
      '--max-response-tokens', '4', '--log-every', '1', '--dtype', 'f32',
    ], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr + run.stdout);
    assert.match(run.stdout, /step 2\/2 loss \d+\.\d+/);
    assert.match(run.stdout, /valid_seen greedy: success \d+\.\d% of 1/);
    for (const f of ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'README.md']) {
      assert.ok(existsSync(join(out, f)), f);
    }
    assert.match(readFileSync(join(out, 'README.md'), 'utf8'), /bun run cli make-default-model --out .* --steps 2/);
    const model = loadModel(out, { trainable: false });
    const tok = await loadTokenizer(out);
    assert.equal(model.config.family, 'qwen2');
    assert.equal(model.config.vocabSize, tok.vocabSize);
    assert.equal(model.config.tieEmbeddings, true);
    assert.deepEqual(tok.eosTokenIds, [tok.tokenToId(IM_END), tok.tokenToId('<|endoftext|>')]);
    const ckpt = openCheckpoint(out);
    const params = ckpt.names().reduce((n, name) => n + ckpt.info(name).shape.reduce((a, b) => a * b, 1), 0);
    ckpt.close();
    assert.equal(statSync(join(out, 'model.safetensors')).size > params * 4, true);
    for (const p of model.parameters()) p.dispose();
  });

  test('rejects a head count that does not divide the hidden size', slow, () => {
    const cli = new URL('../src/cli/main.ts', import.meta.url).pathname;
    const run = spawnSync(process.execPath, [cli, 'make-default-model', '--hidden', '30', '--heads', '4'], { encoding: 'utf8' });
    assert.notEqual(run.status, 0);
    assert.match(run.stderr, /--hidden 30 must be a multiple of --heads 4/);
  });
});
