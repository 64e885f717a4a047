import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as ck from '../src/kernels/copy.ts';
import * as lk from '../src/kernels/logprob.ts';
import { randn, mulberry32 } from '../src/util/random.ts';
import * as ref from '../src/reference/logprob.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { concat } from '../src/tensor/ops/index.ts';
import { defaultChunk, tokenLogprobs, tokenLogprobsFromLogits } from '../src/tensor/ops/logprob.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { empty, tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read } from './support/gpu.ts';

function targetsFor(n: number, vocab: number, seed: number): Int32Array {
  const r = mulberry32(seed);
  return Int32Array.from({ length: n }, () => Math.floor(r() * vocab));
}

// The software GPU shares two cores with other work; compiling a kernel (the LM-head
// matmul's among them) can take seconds.
const slow = { timeout: 300_000 };

const sizes: [number, number][] = [[1, 50], [7, 333], [33, 50]];

describe('token log-probs from logits', () => {
  test('log-probs and entropies match the CPU reference', slow, async () => {
    await gpu();
    for (const [n, vocab] of sizes) {
      for (const temperature of [1, 0.7]) {
        const logits = randn(n * vocab, n + vocab, 2.5);
        const targets = targetsFor(n, vocab, n);
        const want = ref.tokenLogprobs(logits, targets, n, vocab, temperature);
        await scopeAsync(async () => {
          const x = tensor(logits, [n, vocab]);
          const withEnt = tokenLogprobsFromLogits(x, targets, { temperature, withEntropy: true });
          const label = `N=${n} V=${vocab} T=${temperature}`;
          assertClose(await read(withEnt.logprobs), want.logprobs, { atol: 2e-5, rtol: 1e-5, label: `${label} logprobs` });
          assertClose(await read(withEnt.entropy!), want.entropy, { atol: 2e-5, rtol: 1e-5, label: `${label} entropy` });
          const plain = tokenLogprobsFromLogits(x, tensor(targets, [n]), { temperature });
          assert.equal(plain.entropy, undefined);
          assertClose(await read(plain.logprobs), want.logprobs, { atol: 2e-5, rtol: 1e-5, label: `${label} logprobs (no entropy)` });
        });
      }
    }
  });

  test('large logits and a peaked distribution keep their precision', slow, async () => {
    await gpu();
    const n = 3;
    const vocab = 333;
    const logits = randn(n * vocab, 9, 1);
    for (let j = 0; j < vocab; j++) logits[j] += 80;
    logits[vocab + 17] = 40;
    const targets = Int32Array.from([5, 17, 300]);
    const want = ref.tokenLogprobs(logits, targets, n, vocab);
    await scopeAsync(async () => {
      const got = tokenLogprobsFromLogits(tensor(logits, [n, vocab]), targets, { withEntropy: true });
      assertClose(await read(got.logprobs), want.logprobs, { atol: 1e-4, rtol: 1e-5, label: 'logprobs' });
      assertClose(await read(got.entropy!), want.entropy, { atol: 1e-6, rtol: 1e-3, label: 'entropy' });
    });
  });

  test('the logits gradient matches the CPU reference', slow, async () => {
    await gpu();
    const [n, vocab, temperature] = [7, 333, 0.7];
    const logits = randn(n * vocab, 3, 2);
    const targets = targetsFor(n, vocab, 4);
    const gLp = randn(n, 5);
    const gEnt = randn(n, 6);
    for (const withEntropy of [false, true]) {
      await scopeAsync(async () => {
        const x = requireGrad(tensor(logits, [n, vocab]));
        const out = tokenLogprobsFromLogits(x, targets, { temperature, withEntropy });
        const y = withEntropy ? concat([out.logprobs, out.entropy!], 0) : out.logprobs;
        backward(y, tensor(withEntropy ? Float32Array.from([...gLp, ...gEnt]) : gLp, y.shape));
        const want = ref.tokenLogprobsGrad(logits, targets, n, vocab, gLp, withEntropy ? gEnt : null, temperature);
        assertClose(await read(x.grad!), want, { atol: 1e-6, rtol: 1e-4, label: `dlogits (entropy ${withEntropy})` });
      });
    }
  });

  test('backward passes finite differences', slow, async () => {
    await gpu();
    const [n, vocab] = [3, 11];
    const targets = targetsFor(n, vocab, 8);
    const data = randn(n * vocab, 10, 1.5);
    await gradCheck((x) => tokenLogprobsFromLogits(x, targets, { temperature: 0.8 }).logprobs, [{ data, shape: [n, vocab] }], { label: 'logprobs', probe: 12 });
    await gradCheck((x) => {
      const r = tokenLogprobsFromLogits(x, targets, { temperature: 1.3, withEntropy: true });
      return concat([r.logprobs, r.entropy!], 0);
    }, [{ data, shape: [n, vocab] }], { label: 'logprobs + entropy', probe: 12 });
    await gradCheck((x) => tokenLogprobsFromLogits(x, targets, { withEntropy: true }).entropy!, [{ data, shape: [n, vocab] }], { label: 'entropy', probe: 12 });
  });

  test('bad input is refused before any dispatch', async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(new Float32Array(12), [3, 4]);
      assert.throws(() => tokenLogprobsFromLogits(x, [0, 4, 1]), /tokenLogprobsFromLogits: target 4 at position 1 is outside the vocabulary \[0, 4\)/);
      assert.throws(() => tokenLogprobsFromLogits(x, [0, -1, 1]), /target -1 at position 1/);
      assert.throws(() => tokenLogprobsFromLogits(x, [0, 1]), /ShapeError|2 targets do not match 3 tokens/);
      assert.throws(() => tokenLogprobsFromLogits(x, tensor(new Int32Array(4), [4])), /targets \[4\] do not match 3 tokens/);
      assert.throws(() => tokenLogprobsFromLogits(x, tensor(new Float32Array(3), [3])), /targets has dtype f32, expected i32/);
      assert.throws(() => tokenLogprobsFromLogits(tensor(new Float32Array(12), [12]), new Int32Array(12)), /logits \[12\] are not \[tokens, vocab\]/);
      assert.throws(() => tokenLogprobsFromLogits(x, [0, 1, 2], { temperature: 0 }), /temperature must be a positive finite number/);
    });
  });

  test('a target id outside the vocabulary in a GPU tensor gives NaN', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const got = await read(tokenLogprobsFromLogits(tensor(randn(12, 2), [3, 4]), tensor(Int32Array.from([1, 4, -1]), [3])).logprobs);
      assert.ok(Number.isFinite(got[0]) && Number.isNaN(got[1]) && Number.isNaN(got[2]), `got ${got}`);
    });
  });
});

describe('per-chunk statistics', () => {
  test('merging ragged vocabulary chunks equals the whole-row result', slow, async () => {
    const rt0 = await gpu();
    assert.equal(lk.statsLayout(rt0), rt0.caps.compatibility ? 'invocation' : 'workgroup');
    for (const [n, vocab, chunk] of [[7, 333, 64], [33, 50, 16], [1, 50, 49]]) {
      const logits = randn(n * vocab, vocab + 1, 3);
      const targets = targetsFor(n, vocab, vocab + 2);
      const temperature = 0.6;
      const gLp = randn(n, 11);
      const gEnt = randn(n, 12);
      const want = ref.tokenLogprobs(logits, targets, n, vocab, temperature);
      const wantGrad = ref.tokenLogprobsGrad(logits, targets, n, vocab, gLp, gEnt, temperature);
      await scopeAsync(async () => {
        const rt = await gpu();
        const x = tensor(logits, [n, vocab]);
        const ids = tensor(targets, [n]);
        const state = empty([n, 4]);
        const out = empty([2, n]);
        const g = tensor(Float32Array.from([...gLp, ...gEnt]), [2, n]);
        const dlogits = empty([n, vocab]);
        const chunks: { col0: number; width: number; buf: GPUBuffer }[] = [];
        for (let col0 = 0; col0 < vocab; col0 += chunk) {
          const width = Math.min(chunk, vocab - col0);
          const part = empty([n, width]);
          ck.gather(rt, x.buffer, part.buffer, [n, width], [vocab, 1], col0);
          chunks.push({ col0, width, buf: part.buffer });
        }
        const label = `N=${n} V=${vocab} chunk=${chunk}`;
        for (const layout of ['workgroup', 'invocation'] as const) {
          chunks.forEach((c, i) => {
            lk.logprobStats(rt, c.buf, ids.buffer, state.buffer, out.buffer,
              { rows: n, width: c.width, col0: c.col0, invT: 1 / temperature, entropy: true }, i === 0, i === chunks.length - 1, layout);
          });
          const got = await read(out);
          assertClose(got.subarray(0, n), want.logprobs, { atol: 2e-5, rtol: 1e-5, label: `${label} logprobs, row per ${layout}` });
          assertClose(got.subarray(n), want.entropy, { atol: 2e-5, rtol: 1e-5, label: `${label} entropy, row per ${layout}` });
        }
        for (const c of chunks) {
          lk.logprobGrad(rt, c.buf, ids.buffer, state.buffer, g.buffer, { rows: n, width: c.width, col0: c.col0, invT: 1 / temperature, entropy: true });
          ck.scatter(rt, c.buf, dlogits.buffer, [n, c.width], [vocab, 1], c.col0);
        }
        assertClose(await read(dlogits), wantGrad, { atol: 1e-6, rtol: 1e-4, label: `${label} dlogits (in place)` });
      });
    }
  });
});

describe('token log-probs from hidden states and the LM head', () => {
  const h = 9;

  test('chunked log-probs and entropies match the CPU reference', slow, async () => {
    await gpu();
    const cases: [number, number, number | undefined][] = [[1, 50, 16], [7, 333, 64], [33, 50, 7], [7, 333, undefined], [33, 333, 100]];
    for (const [n, vocab, chunk] of cases) {
      for (const temperature of [1, 0.6]) {
        const hidden = randn(n * h, n + 20, 1);
        const weight = randn(vocab * h, vocab + 21, 0.5);
        const targets = targetsFor(n, vocab, n + 22);
        const want = ref.tokenLogprobs(ref.lmHeadLogits(hidden, weight, n, h, vocab), targets, n, vocab, temperature);
        await scopeAsync(async () => {
          const ht = tensor(hidden, [n, h]);
          const wt = tensor(weight, [vocab, h]);
          const label = `N=${n} V=${vocab} chunk=${chunk} T=${temperature}`;
          const both = tokenLogprobs(ht, wt, targets, { chunk, temperature, withEntropy: true });
          assertClose(await read(both.logprobs), want.logprobs, { atol: 5e-5, rtol: 1e-5, label: `${label} logprobs` });
          assertClose(await read(both.entropy!), want.entropy, { atol: 5e-5, rtol: 1e-5, label: `${label} entropy` });
          const plain = tokenLogprobs(ht, wt, tensor(targets, [n]), { chunk, temperature });
          assert.equal(plain.entropy, undefined);
          assertClose(await read(plain.logprobs), want.logprobs, { atol: 5e-5, rtol: 1e-5, label: `${label} logprobs (no entropy)` });
        });
      }
    }
  });

  test('hidden and weight gradients match the CPU reference', slow, async () => {
    await gpu();
    const [n, vocab, temperature] = [7, 333, 0.8];
    const hidden = randn(n * h, 30, 1);
    const weight = randn(vocab * h, 31, 0.5);
    const targets = targetsFor(n, vocab, 32);
    const gLp = randn(n, 33);
    const gEnt = randn(n, 34);
    const logits = ref.lmHeadLogits(hidden, weight, n, h, vocab);
    for (const [chunk, withEntropy] of [[64, true], [100, false], [333, true]] as const) {
      const dlogits = ref.tokenLogprobsGrad(logits, targets, n, vocab, gLp, withEntropy ? gEnt : null, temperature);
      const want = ref.lmHeadGrads(dlogits, hidden, weight, n, h, vocab);
      await scopeAsync(async () => {
        const ht = requireGrad(tensor(hidden, [n, h]));
        const wt = requireGrad(tensor(weight, [vocab, h]));
        const out = tokenLogprobs(ht, wt, targets, { chunk, temperature, withEntropy });
        const y = withEntropy ? concat([out.logprobs, out.entropy!], 0) : out.logprobs;
        backward(y, tensor(withEntropy ? Float32Array.from([...gLp, ...gEnt]) : gLp, y.shape));
        const label = `chunk=${chunk} entropy=${withEntropy}`;
        assertClose(await read(ht.grad!), want.dHidden, { atol: 1e-5, rtol: 1e-4, label: `${label} dhidden` });
        assertClose(await read(wt.grad!), want.dWeight, { atol: 1e-5, rtol: 1e-4, label: `${label} dweight` });
      });
    }
  });

  test('only the inputs that need a gradient get one', slow, async () => {
    await gpu();
    const [n, vocab] = [5, 50];
    const hidden = randn(n * h, 40);
    const weight = randn(vocab * h, 41, 0.5);
    const targets = targetsFor(n, vocab, 42);
    const dlogits = ref.tokenLogprobsGrad(ref.lmHeadLogits(hidden, weight, n, h, vocab), targets, n, vocab, new Float64Array(n).fill(1), null);
    const want = ref.lmHeadGrads(dlogits, hidden, weight, n, h, vocab);
    await scopeAsync(async () => {
      const wt = requireGrad(tensor(weight, [vocab, h]));
      const ht = tensor(hidden, [n, h]);
      backward(tokenLogprobs(ht, wt, targets, { chunk: 16 }).logprobs, tensor(new Float32Array(n).fill(1), [n]));
      assert.equal(ht.grad, null);
      assertClose(await read(wt.grad!), want.dWeight, { atol: 1e-5, rtol: 1e-4, label: 'dweight' });
    });
  });

  test('backward passes finite differences on hidden and weight', slow, async () => {
    await gpu();
    const [n, vocab, hh] = [3, 23, 5];
    const targets = targetsFor(n, vocab, 50);
    const inputs = [
      { data: randn(n * hh, 51, 1), shape: [n, hh] },
      { data: randn(vocab * hh, 52, 0.7), shape: [vocab, hh] },
    ];
    await gradCheck((x, w) => tokenLogprobs(x, w, targets, { chunk: 8, temperature: 0.7 }).logprobs, inputs, { label: 'logprobs', probe: 10 });
    await gradCheck((x, w) => {
      const r = tokenLogprobs(x, w, targets, { chunk: 6, temperature: 1.4, withEntropy: true });
      return concat([r.logprobs, r.entropy!], 0);
    }, inputs, { label: 'logprobs + entropy', probe: 10 });
  });

  test('bad input is refused before any dispatch', async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(new Float32Array(3 * h), [3, h]);
      const w = tensor(new Float32Array(10 * h), [10, h]);
      assert.throws(() => tokenLogprobs(x, tensor(new Float32Array(10 * 8), [10, 8]), [0, 1, 2]), /tokenLogprobs: hidden \[3, 9\] and weight \[10, 8\] are not \[tokens, hidden\] and \[vocab, hidden\]/);
      assert.throws(() => tokenLogprobs(x.view([27]), w, [0, 1, 2]), /hidden \[27\] and weight \[10, 9\]/);
      assert.throws(() => tokenLogprobs(x, w, [0, 10, 2]), /tokenLogprobs: target 10 at position 1 is outside the vocabulary \[0, 10\)/);
      assert.throws(() => tokenLogprobs(x, w, [0, 1]), /2 targets do not match 3 tokens/);
      assert.throws(() => tokenLogprobs(x, w, [0, 1, 2], { chunk: 0 }), /chunk must be a positive integer/);
      assert.throws(() => tokenLogprobs(x, tensor(new Int32Array(10 * h), [10, h]), [0, 1, 2]), /weight has dtype i32, expected f32/);
    });
  });

  test('the default chunk cuts the vocabulary into equal chunks within the logits budget', async () => {
    const rt = await gpu();
    const MiB = 2 ** 20;
    assert.equal(defaultChunk(rt, 4096, 896, 151936, 128 * MiB), 8064);
    assert.equal(defaultChunk(rt, 8192, 896, 151936, 128 * MiB), 4096);
    assert.equal(defaultChunk(rt, 7, 9, 333), 333);
    assert.equal(defaultChunk(rt, 10, 4, 100, 40 * 7), 7, 'under 128 rows the width is not rounded');
    assert.equal(defaultChunk(rt, 2 ** 20, 896, 151936, MiB), 1);
    const limit = rt.gpu.limits.maxStorageBufferBindingSize;
    for (const [tokens, vocab] of [[4096, 151936], [8192, 151936], [512, 32000], [4096, 1000]]) {
      const chunk = defaultChunk(rt, tokens, 896, vocab);
      const count = Math.ceil(vocab / chunk);
      assert.ok(chunk * tokens * 4 <= Math.min(512 * MiB, limit), `${tokens} x ${chunk} logits over the budget`);
      // Equal widths rounded up to 128 rows: the last chunk gives back at most 127 per other chunk.
      assert.ok(vocab - (count - 1) * chunk >= chunk - 127 * (count - 1), `${tokens} x ${vocab}: the last of ${count} chunks of ${chunk} is short`);
      assert.equal(count, Math.ceil(vocab / Math.floor(Math.min(512 * MiB, limit) / (4 * tokens))), `${tokens} x ${vocab}: more chunks than the budget needs`);
    }
  });
});
