// End to end, GRPO has to learn something: a one-turn, one-token bandit through the real
// agent loop, local engine, old/reference log-probs and policy update. The reward is
// 10 when the response is one of a fixed eighth of the vocabulary's words, which the
// random model picks about one time in eight; the update must move probability onto
// them. A flipped sign, misaligned advantages or a dead gradient would not.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { DEFAULT_POLICY_LOSS } from '../src/algos/policy_loss.ts';
import type { Environment, EnvSession, StepResult } from '../src/envs/types.ts';
import { loadModel } from '../src/models/load.ts';
import { scoreSequences } from '../src/scoring/score.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { AdamW } from '../src/optim/adamw.ts';
import type { AgentSpec } from '../src/envs/agent_spec.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { encodeTurnPrompt } from '../src/rollout/tokenize_turn.ts';
import { loadConfig } from '../src/config/config.ts';
import { trainingIteration } from '../src/trainer/iteration.ts';
import { runMethod } from '../src/config/methods.ts';
import { Rng } from '../src/util/random.ts';
import { lazyTinyHouseholdModel } from './support/tiny_household.ts';

const slow = { timeout: 600_000 };
const root = mkdtempSync(join(tmpdir(), 'wgt-grpo-learns-'));
after(() => rmSync(root, { recursive: true, force: true }));
const tinyModel = lazyTinyHouseholdModel(root);

const PROMPT = 'Your task is to: pick one word.';

/** One turn: the response (one token's text) wins if it is one of `rewarded`. */
class BanditEnvironment implements Environment {
  readonly name = 'bandit';
  readonly version = '1';
  readonly maxSteps = 1;
  constructor(private readonly rewarded: ReadonlySet<string>) {}
  create(): EnvSession {
    const won = (action: string) => this.rewarded.has(action.trim());
    return {
      task: PROMPT,
      reset: () => ({ observation: 'choose', admissible_actions: [], info: { won: false, task_type: 'bandit' } }),
      step: (action: string): StepResult => {
        const w = won(action);
        return { observation: '', reward: w ? 10 : 0, done: true, admissible_actions: [], info: { won: w, task_type: 'bandit' } };
      },
      close: () => {},
    };
  }
}

const SPEC: AgentSpec = {
  env: 'bandit',
  historyLength: 0,
  maxTurns: 1,
  noop: '',
  renderPrompt: (input) => input.task,
  cutResponse: (r) => r,
  parse: (r) => ({ send: r, historyAction: r, valid: true }),
  skills: () => '',
  formatResponse: (_thought, action) => action,
};

describe('GRPO learns', () => {
  test('a one-token bandit: probability moves onto the rewarded words', slow, async () => {
    const dir = await tinyModel();
    const tokenizer = await loadTokenizer(dir);
    const model = loadModel(dir, { trainable: true });
    const reference = loadModel(dir, { trainable: false });
    const promptIds = encodeTurnPrompt(tokenizer, PROMPT, 256, false).ids;
    const vocab = model.config.vocabSize;
    // Probability of every first token under the current weights.
    const firstTokenProbs = async (): Promise<Float64Array> => {
      const seqs = Array.from({ length: vocab }, (_, t) => [...promptIds, t]);
      const lp = await scoreSequences(model, seqs, { maxBatchTokens: 1 << 16 });
      return Float64Array.from(lp, (v) => Math.exp(v[v.length - 1]));
    };
    const text = (t: number) => tokenizer.decode([t]).trim();
    const rewarded = new Set(Array.from({ length: vocab }, (_, t) => t).filter((t) => t >= 256 && t % 8 === 0 && /^[a-z]+$/.test(text(t))).map(text));
    const winning = Array.from({ length: vocab }, (_, t) => t).filter((t) => rewarded.has(text(t)));
    const mass = (p: Float64Array) => winning.reduce((a, t) => a + p[t], 0);
    const before = mass(await firstTokenProbs());
    const env = new BanditEnvironment(rewarded);
    const cfg = loadConfig(undefined, ['method=grpo']);
    const params = model.parameters();
    const optimizer = new AdamW(params, { lr: 1e-2 });
    const engine = new LocalEngine(model, { tokenizer });
    const rng = Rng.seeded(7, 'bandit');
    const success: number[] = [];
    const curve: number[] = [];
    for (let it = 1; it <= 8; it++) {
      const seed = rng.nextU32();
      const result = await trainingIteration({
        rollout: {
          env, spec: SPEC, engine, tokenizer, groupSize: 32, maxPromptTokens: 256, maxResponseTokens: 1,
          tasks: [{ split: 'train', seed: 0 }, { split: 'train', seed: 1 }], sampling: { temperature: 1, seed }, groupIdPrefix: `it${it}-`,
        },
        update: {
          model, optimizer, params, lr: 1e-2,
          loss: { ...DEFAULT_POLICY_LOSS, entropyCoef: 0 },
          gradClip: 1, miniBatchSize: 16, microBatchTokens: 8192, temperature: 1,
          shuffle: (n) => Rng.seeded(seed, 'shuffle').shuffle(Array.from({ length: n }, (_, i) => i)),
        },
        mergeTurns: true,
        reference: { kind: 'model', model: reference },
        plan: runMethod(cfg).plan(it),
      });
      success.push(result.rollout.stats.successRate);
      curve.push(mass(await firstTokenProbs()));
    }
    console.log(`bandit: ${rewarded.size} rewarded words; their probability ${[before, ...curve].map((p) => p.toFixed(3)).join(' ')}; rollout success ${success.map((s) => s.toFixed(2)).join(' ')}`);
    assert.ok(before > 0.03 && before < 0.3, `the rewarded words start with p = ${before}`);
    // It climbs iteration after iteration (each step samples only a few winners, so slowly).
    const rises = curve.filter((p, i) => p > (i === 0 ? before : curve[i - 1])).length;
    assert.ok(rises >= curve.length - 1, `p(rewarded) ${before} then ${curve.join(', ')}`);
    assert.ok(curve.at(-1)! > 1.5 * before, `p(rewarded) ${before} -> ${curve.at(-1)}`);
    for (const p of [...params, ...reference.parameters()]) p.dispose();
  });
});
