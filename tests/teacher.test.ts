// The teacher pass and the advantage transforms on the GPU path: teacher log-probs
// from a scoring server (our vLLM-compatible serve) equal the in-process model's, the
// teacher pass refuses samples rolled out without teacher prompts, and every
// transform's per-token advantages drive the GPU policy loss (at ratio 1 the pg loss
// is −mean_t(Â) of exactly the advantages the transform returned).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { adrsAdvantages } from '../src/algos/methods/adrs.ts';
import { agentOpsdAdvantages } from '../src/algos/methods/agent_opsd.ts';
import { gigpoAdvantages } from '../src/algos/methods/gigpo.ts';
import { DEFAULT_POLICY_LOSS, policyLoss } from '../src/algos/policy_loss.ts';
import { rlsdAdvantages } from '../src/algos/methods/rlsd.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel } from '../src/models/load.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { HttpEngine } from '../src/engines/http_engine.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import type { StepSample } from '../src/rollout/sample.ts';
import { startServer } from '../src/serve/server.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { resolveConfig, TrainConfigSchema } from '../src/config/config_schema.ts';
import { teacherLogprobs, teacherSequences } from '../src/trainer/teacher.ts';
import { assertClose, gpu, read } from './support/gpu.ts';
import { tinyHouseholdModel } from './support/tiny_household.ts';

const A = resolveConfig(TrainConfigSchema.parse({})).algorithm;

function sample(i: number, prompt: number[], teacher: number[] | undefined, response: number[], extra: Partial<StepSample> = {}): StepSample {
  return {
    groupId: 'g0', trajectoryId: `t${i % 2}`, turn: Math.floor(i / 2), taskType: 'x', promptIds: prompt, responseIds: response,
    responseLogprobs: response.map(() => -1), valid: true, score: i % 2 ? 10 : 0, episodeReturn: i % 2 ? 10 : 0, won: i % 2 === 1,
    state: `s${Math.floor(i / 2)}`, ...(teacher ? { teacherPromptIds: teacher } : {}), ...extra,
  };
}

describe('teacher pass', () => {
  test('a scoring server gives the in-process model\'s teacher log-probs', { timeout: 120_000 }, async () => {
    await gpu();
    const dir = join(mkdtempSync(join(tmpdir(), 'wgt-teacher-')), 'model');
    await tinyHouseholdModel(dir);
    const tokenizer = await loadTokenizer(dir);
    const model = loadModel(dir, { trainable: false });
    const samples = [
      sample(0, [3, 4, 5], [9, 8, 3, 4, 5], [6, 7, 8]),
      sample(1, [3, 4], [9, 3, 4], [10, 11]),
    ];
    const local = (await teacherLogprobs({ kind: 'model', model }, samples, teacherSequences(samples, true), 4096)).logprobs;
    const server = await startServer(new LocalEngine(model, { tokenizer, name: 'teacher' }), { port: 0 });
    try {
      const remote = (await teacherLogprobs({ kind: 'engine', engine: new HttpEngine({ baseUrl: server.url, model: 'teacher' }) }, samples, teacherSequences(samples, true), 4096)).logprobs;
      assert.deepEqual(remote.map((r) => r.length), [3, 2]);
      remote.forEach((r, i) => assertClose(r, local[i], { atol: 1e-4, label: `sample ${i}` }));
      // Two turns of one episode whose teacher prompts only grow: one sequence, sent as its first prompt and the rest.
      const chained = [sample(0, [3, 4, 5], [9, 8, 3, 4, 5], [6, 7, 8]), sample(2, [3, 4, 5, 6, 7, 8, 12], [9, 8, 3, 4, 5, 6, 7, 8, 12], [10, 11])];
      assert.equal(teacherSequences(chained, true).length, 1);
      const perTurn = (await teacherLogprobs({ kind: 'model', model }, chained, teacherSequences(chained, false), 4096)).logprobs;
      const merged = (await teacherLogprobs({ kind: 'engine', engine: new HttpEngine({ baseUrl: server.url, model: 'teacher' }) }, chained, teacherSequences(chained, true), 4096)).logprobs;
      merged.forEach((r, i) => assertClose(r, perTurn[i], { atol: 1e-4, label: `chained sample ${i}` }));
    } finally {
      await server.close();
    }
    // The skills block changes what the teacher sees: its log-probs differ from the plain prompt's.
    const plainSamples = samples.map((s) => ({ ...s, teacherPromptIds: s.promptIds }));
    const plain = (await teacherLogprobs({ kind: 'model', model }, plainSamples, teacherSequences(plainSamples, true), 4096)).logprobs;
    assert.ok(plain.some((p, i) => p.some((v, j) => Math.abs(v - local[i][j]) > 1e-4)));
    for (const p of model.parameters()) p.dispose();
  });

  test('samples rolled out without teacher prompts are refused, naming the sample', () => {
    assert.throws(() => teacherSequences([sample(0, [1], undefined, [2])], true), /teacher pass: sample 0 \(t0 turn 0\) has no teacher prompt/);
  });
});

describe('advantage transforms on the GPU policy loss', () => {
  const samples = [0, 1, 2, 3].map((i) => sample(i, [1], [1], [2, 3, 4].slice(0, 2 + (i % 2))));
  const adv = Float64Array.from([-0.9, 0.9, -0.9, 0.9]);
  const old = samples.map((s, i) => Float32Array.from(s.responseIds.map((_, j) => -1 - 0.1 * i - 0.05 * j)));
  const teacher = samples.map((s, i) => Float32Array.from(s.responseIds.map((_, j) => -0.8 - 0.2 * ((i + j) % 3))));
  const transforms: Record<string, () => Float32Array[]> = {
    rlsd: () => rlsdAdvantages(samples, adv, teacher, old, 0.5, A.rlsd).advantages,
    agent_opsd_turn: () => agentOpsdAdvantages(samples, adv, teacher, old, { ...A.agent_opsd, granularity: 'turn' }, 10).advantages,
    agent_opsd_token: () => agentOpsdAdvantages(samples, adv, teacher, old, { ...A.agent_opsd, granularity: 'token' }, 10).advantages,
    adrs: () => adrsAdvantages(samples, adv, teacher, 30, A.adrs).advantages,
    gigpo: () => gigpoAdvantages(samples, adv, A.gigpo).advantages,
  };
  for (const [name, run] of Object.entries(transforms)) {
    test(`${name}`, async () => {
      await gpu();
      const advantages = run();
      const flat = advantages.flatMap((a) => [...a]);
      assert.ok(flat.every(Number.isFinite));
      // Every transform reshapes the backbone's advantages: none leaves all of them as they were.
      assert.ok(advantages.some((a, i) => a.some((v) => Math.abs(v - adv[i]) > 1e-6)), `${name} changes some advantage`);
      const lold = old.flatMap((a) => [...a]);
      const n = flat.length;
      await scopeAsync(async () => {
        const t = policyLoss({
          logprobs: tensor(lold), oldLogprobs: tensor(lold), advantages: tensor(flat),
          negativeMask: tensor(flat.map((a) => (a < 0 ? 1 : 0))), weights: tensor(new Array(n).fill(1 / n)),
        }, { ...DEFAULT_POLICY_LOSS, klCoef: 0, entropyCoef: 0 });
        assertClose(await read(t.pg), [-flat.reduce((a, b) => a + b, 0) / n], { atol: 1e-6, label: `${name} pg` });
      });
    });
  }
});
