import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { greedyGenerate, lastLogits } from '../src/scoring/generate.ts';
import { loadCausalLM, loadModel, randomModel, saveModel } from '../src/models/load.ts';
import { loadLora } from '../src/lora/lora.ts';
import type { QwenModel } from '../src/models/qwen.ts';
import { SafetensorsFile } from '../src/safetensors/reader.ts';
import type { GenerationRequest, SamplingParams } from '../src/engines/engine.ts';
import { EngineRequestError } from '../src/engines/errors.ts';
import { LocalEngine } from '../src/engines/local_engine.ts';
import { decodeRowBytes } from '../src/memory/memory_plan.ts';
import { noGrad } from '../src/tensor/autograd.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, withPolicy } from './support/gpu.ts';
import { writeRandomAdapter } from './support/random_adapter.ts';
import { stepDecode } from './support/step_decoder.ts';
import { tinyTokenizer } from './support/tiny_tokenizer.ts';

// The software GPU is slow and shared: GPU tests get more than the runner's 5 s default.
const slow = { timeout: 120_000 };

const fixture = (name: string) => new URL(`./fixtures/${name}/`, import.meta.url).pathname;
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'local-engine-test-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

const GREEDY: SamplingParams = { maxTokens: 10, temperature: 0, topP: 1, topK: 0 };
const req = (promptIds: number[], params: Partial<SamplingParams> = {}): GenerationRequest => ({ promptIds, params: { ...GREEDY, ...params } });

/**
 * Decoding from the f32 weights, for tests that hold sampled log-probs to score()'s: on
 * a real GPU the fused steps read f16 copies by default, whose gap is
 * tests/half_weights.test.ts's to measure.
 */
const f32Decode = async <T>(body: () => Promise<T>) => withPolicy(await gpu(), { decode: { weights: 'f32' } }, body);

describe('LocalEngine', () => {
  let model: QwenModel;
  let engine: LocalEngine;
  let prompt: number[];
  let want: number[];

  test('greedy generation equals the fixture continuation (qwen2-tiny, qwen3.5-tiny, qwen3-tiny)', slow, async () => {
    await gpu();
    for (const name of ['qwen2-tiny', 'qwen35-tiny', 'qwen3-tiny']) {
      const m = loadCausalLM(fixture(name), { trainable: false });
      const expected = SafetensorsFile.open(`${fixture(name)}expected.safetensors`);
      const p = [...expected.readInt32('greedy.prompt')];
      const w = [...expected.readInt32('greedy.output')].slice(p.length);
      const e = new LocalEngine(m);
      const [r] = await e.generate([req(p, { maxTokens: w.length })]);
      assert.deepEqual(r.tokenIds, w, name);
      assert.equal(r.finishReason, 'length');
      assert.equal(r.text, '');
      assert.equal(r.logprobs.length, w.length);
      if (name !== 'qwen3-tiny') {
        for (const t of m.parameters()) t.dispose();
        continue;
      }
      model = m as QwenModel;
      engine = e;
      prompt = p;
      want = w;
    }
  });

  test('prompts of different lengths share a left-padded batch and match single-row runs', slow, async () => {
    const prompts = [prompt.slice(0, 2), prompt, [7, 3, 250, 18, 9, 41, 2, 77, 5], [300]];
    const batched = await engine.generate(prompts.map((p) => req(p, { maxTokens: 6 })));
    for (let i = 0; i < prompts.length; i++) {
      const [alone] = await engine.generate([req(prompts[i], { maxTokens: 6 })]);
      assert.deepEqual(batched[i].tokenIds, alone.tokenIds, `prompt ${i}`);
      assertClose(batched[i].logprobs, alone.logprobs, { atol: 1e-4, label: `prompt ${i} log-probs` });
    }
    assert.deepEqual(batched[1].tokenIds, want.slice(0, 6));
    const padded = [...(await greedyGenerate(model, Int32Array.from(prompts[2]), 6))].slice(prompts[2].length);
    assert.deepEqual(batched[2].tokenIds, padded);
  });

  test('sampled log-probs equal score() of the same tokens at the sampling temperature', slow, async () => {
    const cases: Partial<SamplingParams>[] = [
      { temperature: 0.8, topK: 20, topP: 0.9, seed: 1 },
      { temperature: 1.3, seed: 2 },
      { temperature: 0 },
    ];
    for (const c of cases) {
      const prompts = [prompt, prompt.slice(0, 3)];
      const gen = await f32Decode(() => engine.generate(prompts.map((p) => req(p, { maxTokens: 8, ...c }))));
      const scored = await engine.score(prompts.map((p, i) => ({ promptIds: p, completionIds: gen[i].tokenIds })), { temperature: c.temperature || 1 });
      gen.forEach((g, i) => assertClose(g.logprobs, scored[i], { atol: 2e-4, rtol: 1e-4, label: `${JSON.stringify(c)} row ${i}` }));
    }
  });

  test('a seed gives the same tokens alone, in any batch, and under any maxBatch', slow, async () => {
    const p = { maxTokens: 8, temperature: 1, topK: 50, topP: 0.95 };
    const [alone] = await engine.generate([req(prompt, { ...p, seed: 123 })]);
    const mixed = await engine.generate([req([1, 2, 3], { ...p, seed: 5 }), req(prompt, { ...p, seed: 123 }), req(prompt.slice(1), { ...p, temperature: 0.5 })]);
    assert.deepEqual(mixed[1].tokenIds, alone.tokenIds);
    const split = new LocalEngine(model, { maxBatch: 1 });
    const one = await split.generate([req([1, 2, 3], { ...p, seed: 5 }), req(prompt, { ...p, seed: 123 })]);
    assert.deepEqual(one[0].tokenIds, mixed[0].tokenIds);
    assert.deepEqual(one[1].tokenIds, alone.tokenIds);
    const others = await engine.generate([124, 125, 126].map((seed) => req(prompt, { ...p, seed })));
    assert.ok(others.some((o) => o.tokenIds.join() !== alone.tokenIds.join()), 'different seeds gave identical samples');
  });

  test('the decode kernel\'s longer chunks of keys sample the tokens of 64-key chunks, log-probs within rounding', slow, async () => {
    const rt = await gpu();
    const p = { maxTokens: 8, temperature: 1, topK: 0, topP: 1 };
    const requests = [0, 1, 2].map((seed) => req([...prompt, ...prompt, ...prompt].slice(0, 3 + 7 * seed), { ...p, seed }));
    // The decode kernel, which the software GPU's own attention path does not take.
    const run = (decodeChunk: number) =>
      withPolicy(rt, { attention: { path: 'tiled', decodeInvocations: 4096, decodeChunk } }, () => new LocalEngine(model).generate(requests));
    const base = await run(64);
    for (const decodeChunk of [16, 128, 256]) {
      const got = await run(decodeChunk);
      got.forEach((g, i) => {
        assert.deepEqual(g.tokenIds, base[i].tokenIds, `chunks of ${decodeChunk}, request ${i}`);
        assertClose(Float32Array.from(g.logprobs), Float32Array.from(base[i].logprobs), { atol: 1e-5, rtol: 1e-5, label: `chunks of ${decodeChunk}, request ${i} log-probs` });
      });
    }
  });

  test('batches hold as many rows as their own lengths fit in maxBatchBytes: short prompts share one, long ones split; the same tokens', slow, async () => {
    const p = { maxTokens: 6, temperature: 1, topK: 0, topP: 1 };
    const short = [0, 1, 2, 3].map((seed) => req([1, 2, 3], { ...p, seed }));
    const long = [4, 5].map((seed) => req(Array.from({ length: 40 }, (_, i) => 1 + (i % 20)), { ...p, seed }));
    const cfg = model.config;
    // Room for four rows of the short prompts' cache (3 + 6 - 1 positions), two of the long ones' never.
    const bytes = 4 * decodeRowBytes(cfg, 3 + 6 - 1);
    assert.ok(2 * decodeRowBytes(cfg, 40 + 6 - 1) > bytes);
    const bounded = new LocalEngine(model, { maxBatch: 64, maxBatchBytes: bytes });
    const got = await bounded.generate([...long, ...short]);
    // The short prompts (sorted first) decode as one batch; each long one alone.
    assert.equal(bounded.usage.batches, 3);
    const want = await new LocalEngine(model, { maxBatch: 64 }).generate([...long, ...short]);
    assert.deepEqual(got.map((g) => g.tokenIds), want.map((w) => w.tokenIds));
    assert.throws(() => new LocalEngine(model, { maxBatchBytes: 0 }), /maxBatchBytes must be a positive number/);
  });

  test('steps between readbacks give the one-step loop\'s tokens and log-probs bit for bit, in one readback a chunk (qwen3, fused too, qwen3.5, qwen2)', slow, async () => {
    const rt = await gpu();
    const others = ['qwen35-tiny', 'qwen2-tiny'].map((n) => [n, loadCausalLM(fixture(n), { trainable: false })] as const);
    try {
      for (const [name, m, fused] of [['qwen3-tiny', model, 'never'], ['qwen3-tiny', model, 'always'], ...others.map(([n, x]) => [n, x, 'auto'] as const)] as const) {
        const requests = [
          req(prompt, { maxTokens: 9, stopTokenIds: [want[3]], seed: 1 }),
          req(prompt.slice(0, 3), { maxTokens: 9, temperature: 1, topK: 50, seed: 2 }),
          req([7, 3, 250, 18], { maxTokens: 4, temperature: 0.8, topP: 0.9, seed: 3 }),
          // A hundred and twenty stop ids: a sampled row that stops early.
          req(prompt.slice(2), { maxTokens: 7, temperature: 1.2, seed: 4, stopTokenIds: Array.from({ length: 120 }, (_, i) => 100 + i) }),
        ].map((r) => ({ ...r, params: { ...r.params, seed: r.params.seed! } }));
        // f32 weights, as the reference reads them (the f16 copies: tests/half_weights.test.ts).
        await withPolicy(rt, { decode: { fused, weights: 'f32' } }, async () => {
          const want = await stepDecode(m, requests);
          for (const stepsPerReadback of [1, 3, 16]) {
            await withPolicy(rt, { decode: { stepsPerReadback } }, async () => {
              const reads = rt.readCount;
              const got = await new LocalEngine(m, { compactBelow: 0 }).generate(requests);
              const where = `${name} (fused ${fused}), ${stepsPerReadback} steps a readback`;
              got.forEach((g, i) => assert.deepEqual({ tokenIds: g.tokenIds, logprobs: g.logprobs }, want[i], `${where}: request ${i}`));
              const steps = Math.max(...want.map((w) => w.tokenIds.length));
              assert.equal(rt.readCount - reads, Math.ceil(steps / stepsPerReadback), `${where}: readbacks for ${steps} steps`);
            });
          }
        });
      }
    } finally {
      for (const [, m] of others) for (const t of m.parameters()) t.dispose();
    }
  });

  test('the next chunk is recorded and submitted before the chunk before it is read back', slow, async () => {
    const rt = await gpu();
    const read = rt.read;
    let outstanding = 0;
    let most = 0;
    rt.read = (...args) => {
      most = Math.max(most, ++outstanding);
      return read.apply(rt, args).finally(() => outstanding--);
    };
    try {
      await withPolicy(rt, { decode: { stepsPerReadback: 2 } }, async () => {
        const e = new LocalEngine(model);
        const reads = rt.readCount;
        const [r] = await e.generate([req(prompt, { maxTokens: 8, ignoreEos: true })]);
        assert.deepEqual(r.tokenIds, want.slice(0, 8));
        assert.equal(most, 2, 'readbacks in flight at once');
        // Token limits are known ahead: no chunk past the last token.
        assert.equal(rt.readCount - reads, 4);
        assert.deepEqual([e.usage.chunks, e.usage.overlappedChunks], [4, 3]);
      });
    } finally {
      rt.read = read;
    }
  });

  test('a forward given its position ids and padding on the GPU equals one that uploads them; other shapes are refused', slow, async () => {
    const run = async (gpuInputs: boolean) => scopeAsync(async () => {
      const cache = model.newCache(2, 8, Int32Array.of(0, 3));
      try {
        noGrad(() => model.hiddenCached({ ids: Int32Array.from([...prompt.slice(0, 5), 0, 0, 0, 7, 9]), batch: 2, seq: 5 }, cache));
        const onGpu = gpuInputs ? { positions: tensor(Int32Array.of(5, 2), [2, 1], 'i32'), pad: tensor(Int32Array.of(0, 3), [2], 'i32') } : undefined;
        return [...(await noGrad(() => lastLogits(model, model.hiddenCached({ ids: Int32Array.of(11, 12), batch: 2, seq: 1, onGpu }, cache))).toArray())];
      } finally {
        cache.dispose();
      }
    });
    assert.deepEqual(await run(true), await run(false));
    await scopeAsync(async () => {
      const cache = model.newCache(2, 8, Int32Array.of(0, 3));
      try {
        const onGpu = { positions: tensor(Int32Array.of(5, 2), [2], 'i32'), pad: tensor(Int32Array.of(0, 3), [2], 'i32') };
        assert.throws(() => noGrad(() => model.hiddenCached({ ids: Int32Array.of(11, 12), batch: 2, seq: 1, onGpu }, cache)), /positions i32 \[2\] and pad i32 \[2\] on the GPU must be i32 \[2, 1\] and \[2\]/);
      } finally {
        cache.dispose();
      }
    });
  });

  test('finished rows leave the batch once half are done: the same tokens and log-probs as a batch that keeps them, fewer row-steps', slow, async () => {
    const qwen35 = loadCausalLM(fixture('qwen35-tiny'), { trainable: false });
    try {
      for (const [name, m] of [['qwen3-tiny', model], ['qwen35-tiny', qwen35]] as const) {
        const prompts = [prompt, prompt.slice(0, 3), prompt.slice(1), [7, 3, 250], prompt.slice(2), [5, 9]];
        const requests = prompts.map((p, i) => req(p, { maxTokens: i < 2 ? 12 : 3, temperature: i % 2 ? 0 : 1, topK: 50, seed: 10 + i }));
        const compacting = new LocalEngine(m);
        const keeping = new LocalEngine(m, { compactBelow: 0 });
        const a = await compacting.generate(requests);
        const b = await keeping.generate(requests);
        a.forEach((r, i) => {
          assert.deepEqual(r.tokenIds, b[i].tokenIds, `${name} request ${i}`);
          assertClose(r.logprobs, b[i].logprobs, { atol: 1e-4, label: `${name} request ${i} log-probs` });
        });
        assert.deepEqual(a.map((r) => r.tokenIds.length), [12, 12, 3, 3, 3, 3]);
        assert.ok(compacting.usage.rowSteps < keeping.usage.rowSteps, `${name}: ${compacting.usage.rowSteps} row-steps against ${keeping.usage.rowSteps}`);
        assert.equal(compacting.usage.decodeSteps, keeping.usage.decodeSteps);
      }
    } finally {
      for (const t of qwen35.parameters()) t.dispose();
    }
    assert.throws(() => new LocalEngine(model, { compactBelow: 1 }), /compactBelow must be in \[0, 1\), got 1/);
  });

  test('rows asking the same prompt are prefilled once: each row\'s tokens and log-probs as alone (qwen3, qwen3.5)', slow, async () => {
    const qwen35 = loadCausalLM(fixture('qwen35-tiny'), { trainable: false });
    try {
      for (const [name, m] of [['qwen3-tiny', model], ['qwen35-tiny', qwen35]] as const) {
        // Three samples of one prompt, two of another of the same length, one of a third; sorted by length they interleave.
        const other = [...prompt.slice(1), 9];
        const prompts = [prompt, other, prompt, [7, 3, 250], other, prompt];
        const requests = prompts.map((p, i) => req(p, { maxTokens: 6, temperature: 1, topK: 50, seed: 40 + i }));
        const shared = new LocalEngine(m);
        const together = await shared.generate(requests);
        const alone = await new LocalEngine(m, { maxBatch: 1 }).generate(requests);
        together.forEach((r, i) => {
          assert.deepEqual(r.tokenIds, alone[i].tokenIds, `${name} request ${i}`);
          assertClose(r.logprobs, alone[i].logprobs, { atol: 1e-4, label: `${name} request ${i} log-probs` });
        });
        assert.notDeepEqual(together[0].tokenIds, together[2].tokenIds, `${name}: the samples of one prompt differ`);
        assert.equal(shared.usage.promptTokens, prompts.reduce((n, p) => n + p.length, 0));
        assert.equal(shared.usage.prefilledTokens, prompt.length + other.length + 3);
      }
    } finally {
      for (const t of qwen35.parameters()) t.dispose();
    }
  });

  test('long prompt batches are prefilled in chunks of positions: the same tokens and log-probs as one prefill', slow, async () => {
    const qwen35 = loadCausalLM(fixture('qwen35-tiny'), { trainable: false });
    try {
      for (const [name, m] of [['qwen3-tiny', model], ['qwen35-tiny', qwen35]] as const) {
        const prompts = [prompt, prompt.slice(0, 3), [7, 3, 250, 4, 8, 9, 1], prompt.slice(2)];
        const requests = prompts.map((p, i) => req(p, { maxTokens: 5, temperature: i % 2 ? 0 : 1, topK: 50, seed: 20 + i }));
        const whole = await new LocalEngine(m).generate(requests);
        // 4 rows, 5 tokens a chunk: one position per row at a time.
        const chunked = await new LocalEngine(m, { prefillTokens: 5 }).generate(requests);
        chunked.forEach((r, i) => {
          assert.deepEqual(r.tokenIds, whole[i].tokenIds, `${name} request ${i}`);
          assertClose(r.logprobs, whole[i].logprobs, { atol: 1e-4, label: `${name} request ${i} log-probs` });
        });
      }
    } finally {
      for (const t of qwen35.parameters()) t.dispose();
    }
    assert.throws(() => new LocalEngine(model, { prefillTokens: 0 }), /prefillTokens must be a positive integer, got 0/);
  });

  test('top log-probs list each step\'s most likely tokens with their scored log-probs; onToken follows every row', slow, async () => {
    const cases: Partial<SamplingParams>[] = [{ temperature: 0, logprobs: 3 }, { temperature: 0.8, topK: 20, seed: 4, logprobs: 2 }, { temperature: 1 }];
    const prompts = [prompt, prompt.slice(0, 3), prompt.slice(1)];
    const events: { index: number; id: number; logprob: number; done: boolean }[] = [];
    const gen = await f32Decode(() => engine.generate(prompts.map((p, i) => req(p, { maxTokens: 4, ...cases[i] })), {
      onToken: (index, t) => events.push({ index, id: t.id, logprob: t.logprob, done: t.result !== undefined }),
    }));
    assert.equal(gen[2].topLogprobs, undefined, 'a request without logprobs gets no top lists');
    for (const [i, g] of gen.slice(0, 2).entries()) {
      const n = cases[i].logprobs!;
      assert.equal(g.topLogprobs!.length, g.tokenIds.length);
      const temperature = cases[i].temperature || 1;
      const checks = g.topLogprobs!.flatMap((top, t) => top.map((e) => ({ t, e })));
      const scored = await engine.score(checks.map(({ t, e }) => ({ promptIds: [...prompts[i], ...g.tokenIds.slice(0, t)], completionIds: [e.id] })), { temperature });
      checks.forEach(({ t, e }, k) => assertClose([e.logprob], scored[k], { atol: 2e-4, rtol: 1e-4, label: `request ${i} step ${t} token ${e.id}` }));
      g.topLogprobs!.forEach((top, t) => {
        assert.equal(top.length, n);
        for (let j = 1; j < n; j++) assert.ok(top[j - 1].logprob >= top[j].logprob, `request ${i} step ${t}: not most likely first`);
        const listed = top.find((e) => e.id === g.tokenIds[t]);
        if (listed) assertClose([listed.logprob], [g.logprobs[t]], { atol: 1e-6 });
      });
      if (i === 0) assert.deepEqual(g.topLogprobs!.map((top) => top[0].id), g.tokenIds, 'greedy tokens head their lists');
    }
    gen.forEach((g, i) => {
      const mine = events.filter((e) => e.index === i);
      assert.deepEqual(mine.map((e) => e.id), g.tokenIds, `request ${i}: streamed ids`);
      assert.deepEqual(mine.map((e) => e.logprob), g.logprobs);
      assert.deepEqual(mine.map((e) => e.done), g.tokenIds.map((_, t) => t === g.tokenIds.length - 1), `request ${i}: only the last token carries the result`);
    });
    await assert.rejects(engine.generate([req(prompt, { logprobs: 1.5 })]), /logprobs must be an integer in \[0, 384\]/);
  });

  test('stop token ids end generation after the token, maxTokens 0 gives nothing', slow, async () => {
    const stopId = want[3];
    const [r] = await engine.generate([req(prompt, { stopTokenIds: [stopId] })]);
    const first = want.indexOf(stopId);
    assert.deepEqual(r.tokenIds, want.slice(0, first + 1));
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.stopReason, stopId);
    const [none] = await engine.generate([req(prompt, { maxTokens: 0 })]);
    assert.deepEqual(none, { tokenIds: [], logprobs: [], finishReason: 'length', text: '' });
  });

  test('stop strings and EOS with a tokenizer; stop strings without one are refused', slow, async () => {
    const tok = await tinyTokenizer(path.join(tmpRoot, 'tok'), model.config.vocabSize);
    const withTok = new LocalEngine(model, { tokenizer: tok });
    const [full] = await withTok.generate([req(prompt)]);
    assert.deepEqual(full.tokenIds, want);
    assert.equal(full.text, tok.decode(want));
    let k = 4;
    let stop = '';
    for (; k < want.length; k++) {
      const before = tok.decode(want.slice(0, k));
      const upTo = tok.decode(want.slice(0, k + 1));
      stop = upTo.slice(before.length - 1);
      if (upTo.indexOf(stop) === before.length - 1 && before.length > 0) break;
    }
    assert.ok(k < want.length, 'no usable stop string in the greedy text');
    const [r] = await withTok.generate([req(prompt, { stop: ['never-there', stop] })]);
    assert.deepEqual(r.tokenIds, want.slice(0, k + 1));
    assert.equal(r.finishReason, 'stop');
    assert.equal(r.stopReason, stop);
    assert.equal(r.text, tok.decode(want.slice(0, k + 1)));

    const eosTok = await tinyTokenizer(path.join(tmpRoot, 'tok-eos'), model.config.vocabSize, { eosId: want[2] });
    const eosEngine = new LocalEngine(model, { tokenizer: eosTok });
    const [e] = await eosEngine.generate([req(prompt)]);
    assert.deepEqual(e.tokenIds, want.slice(0, want.indexOf(want[2]) + 1));
    assert.equal(e.finishReason, 'stop');
    assert.equal(e.stopReason, undefined);
    assert.ok(e.text.endsWith('<|end|>'));
    const [skipped] = await eosEngine.generate([req(prompt, { skipSpecialTokens: true })]);
    assert.ok(!skipped.text.includes('<|end|>'));
    const [ignored] = await eosEngine.generate([req(prompt, { ignoreEos: true })]);
    assert.deepEqual(ignored.tokenIds, want);

    await assert.rejects(engine.generate([req(prompt, { stop: ['x'] })]), /stop strings need a tokenizer/);
  });

  test('bad requests are refused naming the request and field', slow, async () => {
    const bad = async (r: GenerationRequest, re: RegExp) => {
      await assert.rejects(engine.generate([req(prompt), r]), (e: Error) => e instanceof EngineRequestError && re.test(e.message));
    };
    await bad(req([1, 384]), /request 1: promptIds\[1\] = 384 is not a token id in \[0, 384\)/);
    await bad(req([1, 2.5]), /promptIds\[1\] = 2.5/);
    await bad(req([]), /request 1: promptIds is empty/);
    await bad(req(prompt, { topP: 0 }), /topP must be in \(0, 1\]/);
    await bad(req(prompt, { temperature: -1 }), /temperature must be/);
    await bad(req(prompt, { maxTokens: 1000 }), /exceed the model's context of 512 tokens/);
    await bad(req(prompt, { stopTokenIds: [-1] }), /stopTokenIds\[0\]/);
    await assert.rejects(engine.generate([req(prompt)], { model: 'nope' }), (e: Error) => e instanceof EngineRequestError && e.kind === 'not_found' && /"nope" does not exist/.test(e.message));
    await assert.rejects(engine.score([{ promptIds: [], completionIds: [1] }]), /promptIds is empty/);
    await assert.rejects(engine.score([{ promptIds: [1], completionIds: [1] }], { temperature: 0 }), /temperature must be a positive/);
    const [r] = await engine.generate([req(prompt, { maxTokens: 3 })]);
    assert.deepEqual(r.tokenIds, want.slice(0, 3), 'the engine still works after refusals');
  });

  test('LoRA adapters by name match a model with the adapter attached; unload forgets them', slow, async () => {
    const dir = path.join(tmpRoot, 'adapter');
    await writeRandomAdapter(model, dir, 40);
    await engine.loadLoraAdapter('a1', dir);
    const [viaName] = await engine.generate([req(prompt)], { model: 'a1' });
    const reference = loadModel(fixture('qwen3-tiny'), { trainable: false });
    loadLora(reference, dir);
    const direct = [...(await greedyGenerate(reference, Int32Array.from(prompt), 10))].slice(prompt.length);
    assert.deepEqual(viaName.tokenIds, direct);
    assert.notDeepEqual(viaName.tokenIds, want, 'the adapter changes nothing');
    const [base] = await engine.generate([req(prompt)]);
    assert.deepEqual(base.tokenIds, want, 'the base model is untouched');
    assert.ok(model.parameters().every((p) => !p.requiresGrad), 'loading an adapter changed the base parameters\' flags');
    await assert.rejects(engine.loadLoraAdapter('a1', dir), /already been loaded/);
    await engine.unloadLoraAdapter('a1');
    await assert.rejects(engine.generate([req(prompt)], { model: 'a1' }), /"a1" does not exist/);
    await assert.rejects(engine.unloadLoraAdapter('a1'), /cannot be found/);
    for (const t of reference.parameters()) t.dispose();
  });

  test('reloadWeights swaps in a checkpoint of the same shape and refuses another', slow, async () => {
    const other = randomModel(model.config, 9, { std: 0.2, trainable: false });
    const dir = path.join(tmpRoot, 'other');
    await saveModel(other, dir);
    const otherGreedy = [...(await greedyGenerate(other, Int32Array.from(prompt), 6))].slice(prompt.length);
    const e = new LocalEngine(loadModel(fixture('qwen3-tiny'), { trainable: false }));
    const old = e.models.base.param('lm_head.weight');
    await e.reloadWeights(dir);
    assert.ok(old.disposed, 'the old weights were not disposed');
    const [r] = await e.generate([req(prompt, { maxTokens: 6 })]);
    assert.deepEqual(r.tokenIds, otherGreedy);
    await assert.rejects(e.reloadWeights(fixture('qwen2-tiny')), /does not match the served model \(family "qwen3" -> "qwen2"/);
    const [still] = await e.generate([req(prompt, { maxTokens: 6 })]);
    assert.deepEqual(still.tokenIds, otherGreedy, 'a refused reload changed the weights');
    for (const t of [...other.parameters(), ...e.models.base.parameters()]) t.dispose();
  });
});
