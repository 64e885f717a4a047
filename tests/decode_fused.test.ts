// The fused decode kernels (skinny residual / concat / swiglu, qkv_cache) against their
// CPU references.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as mk from '../src/kernels/matmul.ts';
import * as ref from '../src/reference/matmul.ts';
import { randn } from '../src/reference/random.ts';
import { qkvCache } from '../src/reference/rope.ts';
import { swigluForward } from '../src/reference/swiglu.ts';
import { noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { linearConcat, linearResidual, linearSwiglu, ropeQkvCache } from '../src/tensor/ops/decode.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

// Each kernel variant compiles once on the software GPU; that dominates the run time.
const slow = { timeout: 300_000 };

let seed = 900;

describe('fused decode kernels', () => {
  test('skinny with a residual: out = residual + act(x W^T + b), every row block, partial column groups', slow, async () => {
    const rt = await gpu();
    const k = 36;
    for (const [m, n, bias, act] of [[1, 13, true, 'none'], [2, 13, false, 'none'], [3, 9, true, 'silu'], [5, 21, false, 'none'], [8, 13, true, 'none'], [9, 7, true, 'none']] as const) {
      const A = randn(m * k, seed++);
      const W = randn(n * k, seed++);
      const b = bias ? randn(n, seed++) : undefined;
      const R = randn(m * n, seed++);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        mk.matmul(rt, {
          a: tensor(A).buffer, b: tensor(W).buffer, bias: b && tensor(b).buffer, residual: tensor(R).buffer, out: out.buffer,
          m, n, k, transB: true, act, tile: mk.SKINNY_TILE,
        });
        const want = ref.matmul({ a: A, b: W, bias: b, c: R, m, n, k, transB: true, act, accumulate: true });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `residual ${m}x${n} bias ${bias} ${act}` });
      });
    }
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => mk.matmul(rt, { a: t.buffer, b: zeros([64]).buffer, out: zeros([64]).buffer, residual: zeros([64]).buffer, m: 2, n: 2, k: 4, transB: true, tile: '64x64/k8' }),
        /a residual needs the skinny tile, not 64x64\/k8/);
      assert.throws(() => mk.matmul(rt, { a: t.buffer, b: zeros([64]).buffer, out: zeros([64]).buffer, residual: zeros([64]).buffer, m: 2, n: 2, k: 4, transB: true, accumulate: true }),
        /residual and accumulate both add to the result/);
    });
  });

  test('skinny_concat: up to three weights side by side, columns of one weight straddling workgroups, with and without biases', slow, async () => {
    const rt = await gpu();
    const k = 20;
    const cases: [number, number[], boolean][] = [
      [1, [12, 5, 7], true], [2, [13, 3, 3], false], [3, [5, 9], true], [4, [11], true], [7, [3, 10, 6], true], [9, [13, 3, 3], true], [6, [4, 4, 4], false],
    ];
    for (const [m, ns, bias] of cases) {
      const A = randn(m * k, seed++);
      const Ws = ns.map((n) => randn(n * k, seed++));
      const bs = bias ? ns.map((n) => randn(n, seed++)) : undefined;
      const n = ns.reduce((s, x) => s + x, 0);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        mk.matmulSkinnyConcat(rt, {
          a: tensor(A).buffer, weights: Ws.map((w) => tensor(w).buffer), ns, biases: bs?.map((b) => tensor(b).buffer), out: out.buffer, m, k,
        });
        const stacked = new Float32Array(n * k);
        Ws.reduce((at, w) => (stacked.set(w, at), at + w.length), 0);
        const bias = bs && Float32Array.from(bs.flatMap((b) => [...b]));
        const want = ref.matmul({ a: A, b: stacked, bias, m, n, k, transB: true });
        assertClose(await read(out), want, { atol: 1e-4, rtol: 1e-4, label: `concat ${m} rows x [${ns}] bias ${bias !== undefined}` });
      });
    }
  });

  test('skinny_swiglu: silu(x Wg^T) * (x Wu^T) for 1 to 9 rows', slow, async () => {
    const rt = await gpu();
    const k = 28;
    for (const [m, n] of [[1, 13], [2, 5], [3, 13], [5, 17], [8, 9], [9, 13]]) {
      const A = randn(m * k, seed++);
      const G = randn(n * k, seed++);
      const U = randn(n * k, seed++);
      await scopeAsync(async () => {
        const out = zeros([m * n]);
        mk.matmulSkinnySwiglu(rt, { a: tensor(A).buffer, gate: tensor(G).buffer, up: tensor(U).buffer, out: out.buffer, m, n, k });
        const gate = ref.matmul({ a: A, b: G, m, n, k, transB: true });
        const up = ref.matmul({ a: A, b: U, m, n, k, transB: true });
        assertClose(await read(out), swigluForward(gate, up), { atol: 1e-4, rtol: 1e-4, label: `swiglu ${m}x${n}` });
      });
    }
  });

  test('qkv_cache: q rotated out, k rotated and v appended to the cache, with and without q/k-norm, partial rotary, heads wider than a workgroup', slow, async () => {
    await gpu();
    const cases = [
      { b: 3, t: 1, hq: 4, hkv: 2, hd: 16, capacity: 9, offset: 5, qkNorm: false },
      { b: 3, t: 1, hq: 4, hkv: 2, hd: 16, capacity: 9, offset: 0, qkNorm: true },
      { b: 2, t: 3, hq: 3, hkv: 1, hd: 12, capacity: 7, offset: 4, qkNorm: true, rotaryDim: 4 },
      { b: 1, t: 2, hq: 2, hkv: 1, hd: 160, capacity: 3, offset: 1, qkNorm: true },
      { b: 2, t: 1, hq: 2, hkv: 2, hd: 96, capacity: 4, offset: 3, qkNorm: false, rotaryDim: 32 },
    ];
    for (const c of cases) {
      const rows = c.b * c.t;
      const qkv = randn(rows * (c.hq + 2 * c.hkv) * c.hd, seed++);
      const positions = Int32Array.from({ length: rows }, (_, i) => (i * 7 + c.offset) % 11);
      const cacheSize = c.b * c.hkv * c.capacity * c.hd;
      const keys = randn(cacheSize, seed++);
      const values = randn(cacheSize, seed++);
      const norm = c.qkNorm ? { q: randn(c.hd, seed++, 0.5).map((x) => x + 1), k: randn(c.hd, seed++, 0.5).map((x) => x + 1), eps: 1e-6 } : undefined;
      const want = qkvCache({ ...c, qkv, positions, keys, values, theta: 10000, qkNorm: norm });
      await scopeAsync(async () => {
        const cache = [c.b, c.hkv, c.capacity, c.hd];
        const kt = tensor(keys, cache);
        const vt = tensor(values, cache);
        const q = ropeQkvCache(tensor(qkv, [c.b, c.t, (c.hq + 2 * c.hkv) * c.hd]), tensor(positions, [c.b, c.t]), kt, vt, c.offset, {
          heads: c.hq, kvHeads: c.hkv, headDim: c.hd, theta: 10000, rotaryDim: c.rotaryDim,
          qkNorm: norm && { q: tensor(norm.q), k: tensor(norm.k), eps: norm.eps },
        });
        assert.deepEqual(q.shape, [c.b, c.hq, c.t, c.hd]);
        const label = JSON.stringify(c);
        assertClose(await read(q), want.q, { atol: 1e-5, rtol: 1e-4, label: `q ${label}` });
        assertClose(await read(kt), want.keys, { atol: 1e-5, rtol: 1e-4, label: `keys ${label}` });
        assertClose(await read(vt), want.values, { atol: 0, rtol: 0, label: `values ${label}` });
      });
    }
  });

  test('the fused ops are inference only and check their shapes', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const x = tensor(randn(2 * 8, seed++), [2, 8]);
      const w = requireGrad(tensor(randn(4 * 8, seed++), [4, 8]));
      assert.throws(() => linearConcat(x, [w]), /linearConcat: inference only/);
      assert.throws(() => linearSwiglu(x, w, w), /linearSwiglu: inference only/);
      assert.throws(() => linearResidual(x, w, null, zeros([2, 4])), /linearResidual: inference only/);
      noGrad(() => {
        assert.throws(() => linearConcat(x, [w, w, w, w]), /1 to 3 weights/);
        assert.throws(() => linearConcat(x, [w], [zeros([3])]), /biases \[3\] do not match weights of 4 rows/);
        assert.throws(() => linearConcat(tensor(randn(6, 1), [2, 3]), [zeros([4, 3])]), /in = 3 must be a multiple of 4/);
        assert.throws(() => linearSwiglu(x, w, zeros([5, 8])), /gate \[4, 8\] and up \[5, 8\] differ/);
        assert.throws(() => linearResidual(x, w, null, zeros([2, 5])), /residual \[2, 5\] must be \[2, 4\]/);
        const qkv = zeros([1, 1, 4 * 4]);
        const cache = zeros([1, 1, 2, 4]);
        const pos = tensor(Int32Array.of(0), [1, 1], 'i32');
        assert.throws(() => ropeQkvCache(qkv, pos, cache, cache, 2, { heads: 2, kvHeads: 1, headDim: 4, theta: 1e4 }), /tokens 2\.\.3 do not fit the cache/);
        assert.throws(() => ropeQkvCache(qkv, pos, cache, cache, 0, { heads: 1, kvHeads: 1, headDim: 4, theta: 1e4 }), /qkv must be \[B, T, 12\]/);
      });
    });
  });
});
