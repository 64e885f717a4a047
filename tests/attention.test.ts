import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as ref from '../src/reference/attention.ts';
import {
  attentionBackward, attentionForward, attentionPath, attentionSharedBytes, attentionTiles, blockedFits, blockedSharedBytes, type AttentionLaunch,
} from '../src/kernels/attention.ts';
import { decodeParts, decodeShape } from '../src/kernels/attention_decode.ts';
import { randn } from '../src/util/random.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { ShapeError } from '../src/tensor/errors.ts';
import { attention, type AttentionOptions } from '../src/tensor/ops/attention.ts';
import { mul, sum } from '../src/tensor/ops/index.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { empty, tensor, type Tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, gradCheck, read, withPolicy } from './support/gpu.ts';
import { attentionInputs, attentionRefDims, type AttentionCase } from './support/attention_cases.ts';

const label = (c: AttentionCase) => `B${c.b} Hq${c.hq} Hkv${c.hkv} Tq${c.tq} S${c.s ?? c.tq}/${c.sCap ?? c.s ?? c.tq} D${c.hd} pad[${c.pad ?? ''}]${c.causal === false ? ' full' : ''}`;

function options(c: AttentionCase): AttentionOptions {
  return {
    padLeft: c.pad ? tensor(Int32Array.from(c.pad), [c.b]) : undefined,
    causal: c.causal,
    scale: c.scale,
    kvLen: c.s,
  };
}

async function checkForward(c: AttentionCase, seed: number): Promise<void> {
  const { sCap, q, k, v } = attentionInputs(c, seed);
  const want = ref.attentionForward(attentionRefDims(c, sCap), q, k, v);
  await scopeAsync(async () => {
    const o = attention(tensor(q, [c.b, c.hq, c.tq, c.hd]), tensor(k, [c.b, c.hkv, sCap, c.hd]), tensor(v, [c.b, c.hkv, sCap, c.hd]), options(c));
    assert.deepEqual([...o.shape], [c.b, c.hq, c.tq, c.hd]);
    assertClose(await read(o), want.o, { atol: 2e-5, rtol: 1e-4, label: label(c) });
  });
}

// The software GPU shares two cores with other work; compiling a tile variant can take seconds.
const slow = { timeout: 300_000 };

/**
 * Finite differences of attention over q, k and v: batch 2, 4 query heads on 2 kv
 * heads, `t` tokens of head dim `hd`, the second row left-padded by `pad`; seeds from
 * `seed` on.
 */
async function gradCheckAttention(t: number, hd: number, pad: number, seed: number, label: string): Promise<void> {
  await gpu();
  const [b, hq, hkv] = [2, 4, 2];
  await scopeAsync(async () => {
    const padLeft = tensor(Int32Array.from([0, pad]), [b]);
    await gradCheck((q, k, v) => attention(q, k, v, { padLeft }), [
      { data: randn(b * hq * t * hd, seed), shape: [b, hq, t, hd] },
      { data: randn(b * hkv * t * hd, seed + 1), shape: [b, hkv, t, hd] },
      { data: randn(b * hkv * t * hd, seed + 2), shape: [b, hkv, t, hd] },
    ], { probe: 8, label });
  });
}

describe('attention', () => {
  test('forward matches the CPU reference (causal, grouped-query, odd lengths)', slow, async () => {
    await gpu();
    const cases: AttentionCase[] = [
      { b: 1, hq: 1, hkv: 1, tq: 1, hd: 32 },
      { b: 2, hq: 2, hkv: 1, tq: 5, hd: 32 },
      { b: 1, hq: 3, hkv: 1, tq: 17, hd: 64 },
      { b: 2, hq: 3, hkv: 3, tq: 33, hd: 32 },
      { b: 1, hq: 4, hkv: 2, tq: 33, hd: 64 },
      { b: 1, hq: 2, hkv: 1, tq: 3, hd: 128 },
    ];
    for (const [i, c] of cases.entries()) await checkForward(c, 10 * i + 1);
  });

  test('the kernel\'s row log-sum-exp matches the reference', slow, async () => {
    const rt = await gpu();
    const cases: AttentionCase[] = [
      { b: 2, hq: 4, hkv: 2, tq: 17, hd: 32, pad: [0, 6] },
      { b: 2, hq: 2, hkv: 1, tq: 2, s: 9, sCap: 10, hd: 64, pad: [3, 0] },
    ];
    for (const [n, c] of cases.entries()) {
      const { sCap, q, k, v } = attentionInputs(c, 31 + n);
      const want = ref.attentionForward(attentionRefDims(c, sCap), q, k, v);
      await scopeAsync(async () => {
        const o = empty([c.b, c.hq, c.tq, c.hd]);
        const lse = empty([c.b, c.hq, c.tq]);
        const dims = { b: c.b, hq: c.hq, hkv: c.hkv, tq: c.tq, s: c.s ?? sCap, sCap, hd: c.hd, scale: 1 / Math.sqrt(c.hd), causal: true };
        const pad = tensor(Int32Array.from(c.pad!), [c.b]);
        attentionForward(rt, dims, tensor(q).buffer, tensor(k).buffer, tensor(v).buffer, pad.buffer, o.buffer, lse.buffer);
        assertClose(await read(lse), want.lse, { atol: 1e-5, rtol: 1e-5, label: `lse ${label(c)}` });
        assertClose(await read(o), want.o, { atol: 2e-5, rtol: 1e-4, label: `o ${label(c)}` });
      });
    }
  });

  test('tilings for head dims 32-128 fit the software GPU and the H200', () => {
    const adapters = [
      { maxComputeWorkgroupStorageSize: 32768, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256 },
      { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024 },
    ];
    for (const limits of adapters) {
      for (const hd of [32, 64, 128]) {
        for (const pass of ['forward', 'backward'] as const) {
          for (const [tq, s] of [[1, 1], [1, 300], [5, 5], [512, 512]]) {
            const t = attentionTiles(limits, pass, hd, tq, s);
            assert.ok(t, `no tiling for ${pass} D${hd} Tq${tq} S${s}`);
            assert.ok(attentionSharedBytes(pass, t.br, t.bc, hd) <= limits.maxComputeWorkgroupStorageSize);
            assert.ok(t.br <= Math.max(tq, 1) * 2 - 1 && t.bc <= s * 2 - 1 && t.wg <= 256);
            assert.ok(Math.ceil(((pass === 'forward' ? t.br : Math.max(t.br, t.bc)) * hd) / t.wg) <= 16);
          }
        }
      }
    }
    assert.equal(attentionTiles(adapters[0], 'forward', 4096, 8, 8), null);
  });

  test('left padding: padded query rows are zero, valid rows match the reference', slow, async () => {
    await gpu();
    const c: AttentionCase = { b: 3, hq: 4, hkv: 2, tq: 17, hd: 32, pad: [0, 3, 16] };
    await checkForward(c, 41);
    const { q, k, v } = attentionInputs(c, 41);
    await scopeAsync(async () => {
      const o = await read(attention(tensor(q, [3, 4, 17, 32]), tensor(k, [3, 2, 17, 32]), tensor(v, [3, 2, 17, 32]), options(c)));
      for (let b = 0; b < 3; b++) {
        for (let h = 0; h < 4; h++) {
          for (let i = 0; i < c.pad![b]; i++) {
            const row = o.subarray(((b * 4 + h) * 17 + i) * 32, ((b * 4 + h) * 17 + i + 1) * 32);
            assert.ok(row.every((x) => x === 0), `row b${b} h${h} i${i} is inside the padding but not zero`);
          }
        }
      }
    });
  });

  test('non-causal, custom scale, and padding', slow, async () => {
    await gpu();
    await checkForward({ b: 2, hq: 2, hkv: 2, tq: 9, hd: 32, pad: [2, 0], causal: false, scale: 0.3 }, 51);
  });

  test('decoding against a KV cache: queries at the last positions, capacity beyond kvLen', slow, async () => {
    await gpu();
    await checkForward({ b: 2, hq: 4, hkv: 2, tq: 1, s: 17, hd: 64, pad: [0, 5] }, 61);
    await checkForward({ b: 2, hq: 3, hkv: 1, tq: 3, s: 11, sCap: 20, hd: 32, pad: [4, 0] }, 71);
  });

  test('a decode step equals the matching rows of the full prefill', slow, async () => {
    await gpu();
    const c: AttentionCase = { b: 2, hq: 2, hkv: 1, tq: 13, hd: 32, pad: [3, 0] };
    const { q, k, v } = attentionInputs(c, 81);
    await scopeAsync(async () => {
      const full = await read(attention(tensor(q, [2, 2, 13, 32]), tensor(k, [2, 1, 13, 32]), tensor(v, [2, 1, 13, 32]), options(c)));
      const last = new Float32Array(2 * 2 * 32);
      for (let r = 0; r < 4; r++) last.set(q.subarray((r * 13 + 12) * 32, (r * 13 + 13) * 32), r * 32);
      const step = await read(attention(tensor(last, [2, 2, 1, 32]), tensor(k, [2, 1, 13, 32]), tensor(v, [2, 1, 13, 32]), options(c)));
      for (let r = 0; r < 4; r++) assertClose(step.subarray(r * 32, (r + 1) * 32), full.subarray((r * 13 + 12) * 32, (r * 13 + 13) * 32), { label: `row ${r}` });
    });
  });

  test('backward matches the CPU reference for q, k and v', slow, async () => {
    await gpu();
    const cases: AttentionCase[] = [
      { b: 2, hq: 4, hkv: 2, tq: 17, hd: 32, pad: [0, 5] },
      { b: 1, hq: 3, hkv: 1, tq: 33, hd: 64, pad: [7] },
      { b: 2, hq: 2, hkv: 2, tq: 6, hd: 32, pad: [1, 0], causal: false },
      { b: 1, hq: 2, hkv: 1, tq: 3, s: 9, sCap: 12, hd: 32, pad: [2] },
      { b: 1, hq: 2, hkv: 1, tq: 5, hd: 128, pad: [1] },
    ];
    for (const [n, c] of cases.entries()) {
      const { sCap, q, k, v } = attentionInputs(c, 100 + 10 * n);
      const dO = randn(q.length, 105 + 10 * n);
      const want = ref.attentionBackward(attentionRefDims(c, sCap), q, k, v, dO);
      await scopeAsync(async () => {
        const qt = requireGrad(tensor(q, [c.b, c.hq, c.tq, c.hd]));
        const kt = requireGrad(tensor(k, [c.b, c.hkv, sCap, c.hd]));
        const vt = requireGrad(tensor(v, [c.b, c.hkv, sCap, c.hd]));
        backward(sum(mul(attention(qt, kt, vt, options(c)), tensor(dO, qt.shape))));
        const tol = { atol: 1e-4, rtol: 1e-3 };
        assertClose(await read(qt.grad!), want.dq, { ...tol, label: `dq ${label(c)}` });
        assertClose(await read(kt.grad!), want.dk, { ...tol, label: `dk ${label(c)}` });
        assertClose(await read(vt.grad!), want.dv, { ...tol, label: `dv ${label(c)}` });
      });
    }
  });

  test('backward computes only the gradients that are needed', slow, async () => {
    await gpu();
    const c: AttentionCase = { b: 2, hq: 2, hkv: 1, tq: 7, hd: 32, pad: [0, 2] };
    const { q, k, v } = attentionInputs(c, 150);
    const dO = randn(q.length, 151);
    const want = ref.attentionBackward(attentionRefDims(c, 7), q, k, v, dO);
    await scopeAsync(async () => {
      const qt = tensor(q, [2, 2, 7, 32]);
      const kt = requireGrad(tensor(k, [2, 1, 7, 32]));
      const vt = tensor(v, [2, 1, 7, 32]);
      backward(sum(mul(attention(qt, kt, vt, options(c)), tensor(dO, qt.shape))));
      assert.equal(qt.grad, null);
      assert.equal(vt.grad, null);
      assertClose(await read(kt.grad!), want.dk, { atol: 1e-4, rtol: 1e-3, label: 'dk alone' });
    });
  });

  test('backward passes finite differences with padding and grouped-query heads', slow, async () => {
    await gradCheckAttention(5, 32, 2, 201, 'attention');
  });

  test('the blocked kernels\' backward passes finite differences (grouped-query partials, padding)', slow, async () => {
    await withPolicy(await gpu(), { attention: { path: 'blocked' } }, () => gradCheckAttention(35, 64, 3, 211, 'attention blocked'));
  });

  test('bad shapes and dtypes are refused naming the op', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const t = (shape: number[]): Tensor => tensor(new Float32Array(shape.reduce((a, n) => a * n, 1)), shape);
      assert.throws(() => attention(t([1, 3, 4, 32]), t([1, 2, 4, 32]), t([1, 2, 4, 32])), (e: Error) => e instanceof ShapeError && /attention: 3 query heads are not a multiple of 2 kv heads/.test(e.message));
      assert.throws(() => attention(t([1, 2, 4, 32]), t([1, 2, 4, 32]), t([1, 2, 5, 32])), /attention: k and v shapes differ/);
      assert.throws(() => attention(t([1, 2, 4, 32]), t([1, 2, 4, 16]), t([1, 2, 4, 16])), /attention: batch or head dim/);
      assert.throws(() => attention(t([2, 4, 32]), t([2, 4, 32]), t([2, 4, 32])), /attention: expected rank-4/);
      assert.throws(() => attention(t([1, 1, 5, 32]), t([1, 1, 4, 32]), t([1, 1, 4, 32])), /attention: 5 query rows but only 4 keys/);
      assert.throws(() => attention(t([2, 1, 4, 32]), t([2, 1, 4, 32]), t([2, 1, 4, 32]), { padLeft: tensor(Int32Array.from([0]), [1]) }), /attention: padLeft \[1\] must be \[2\]/);
      assert.throws(() => attention(t([1, 1, 4, 32]), t([1, 1, 4, 32]), t([1, 1, 4, 32]), { padLeft: t([1]) }), /attention: padLeft has dtype f32/);
      assert.throws(() => attention(t([1, 1, 4, 32]), t([1, 1, 4, 32]), t([1, 1, 4, 32]), { kvLen: 5 }), /attention: kvLen 5 outside/);
      assert.throws(() => attention(t([1, 1, 1, 4096]), t([1, 1, 1, 4096]), t([1, 1, 1, 4096])), /attention: head dim 4096 does not fit/);
    });
  });
});

/** Forward and backward through the launchers with `launch` (a forced path or window size) against the reference. */
async function checkLaunch(c: AttentionCase, seed: number, launch: AttentionLaunch): Promise<void> {
  const rt = await gpu();
  const { sCap, q, k, v } = attentionInputs(c, seed);
  const dO = randn(q.length, seed + 3);
  const want = ref.attentionForward(attentionRefDims(c, sCap), q, k, v);
  const grads = ref.attentionBackward(attentionRefDims(c, sCap), q, k, v, dO);
  const name = `${label(c)} ${launch.path ?? 'auto'} window ${launch.windowRows ?? 'auto'}`;
  await scopeAsync(async () => {
    const dims = { b: c.b, hq: c.hq, hkv: c.hkv, tq: c.tq, s: c.s ?? sCap, sCap, hd: c.hd, scale: c.scale ?? 1 / Math.sqrt(c.hd), causal: c.causal ?? true };
    const pad = c.pad ? tensor(Int32Array.from(c.pad), [c.b]).buffer : null;
    const [qt, kt, vt, dOt] = [tensor(q), tensor(k), tensor(v), tensor(dO)];
    const o = empty([q.length]);
    const lse = empty([c.b * c.hq * c.tq]);
    attentionForward(rt, dims, qt.buffer, kt.buffer, vt.buffer, pad, o.buffer, lse.buffer, launch);
    assertClose(await read(o), want.o, { atol: 2e-5, rtol: 1e-4, label: `o ${name}` });
    assertClose(await read(lse), want.lse, { atol: 1e-5, rtol: 1e-5, label: `lse ${name}` });
    const [dq, dk, dv] = [empty([q.length]), empty([k.length]), empty([v.length])];
    // Garbage in the gradients shows any element a path forgets to write.
    for (const g of [dq, dk, dv]) rt.upload(g.buffer, 0, new Float32Array(g.size).fill(7));
    attentionBackward(rt, dims, qt.buffer, kt.buffer, vt.buffer, pad, o.buffer, dOt.buffer, lse.buffer, empty([c.b * c.hq * c.tq]).buffer,
      { dq: dq.buffer, dk: dk.buffer, dv: dv.buffer }, launch);
    const tol = { atol: 1e-4, rtol: 1e-3 };
    assertClose(await read(dq), grads.dq, { ...tol, label: `dq ${name}` });
    assertClose(await read(dk), grads.dk, { ...tol, label: `dk ${name}` });
    assertClose(await read(dv), grads.dv, { ...tol, label: `dv ${name}` });
  });
}

describe('attention kernel paths', () => {
  test('the software GPU takes the uniform-window kernels, real GPUs the blocked ones where they fit, else the tiled ones', async () => {
    const rt = await gpu();
    const d = { b: 1, hq: 2, hkv: 1, tq: 8, s: 8, sCap: 8, hd: 64, scale: 0.125, causal: true };
    assert.equal(attentionPath(rt, d), rt.caps.compatibility ? 'uniform' : blockedFits(rt.gpu.limits, 64) ? 'blocked' : 'tiled');
    assert.equal(attentionPath(rt, { ...d, hd: 30 }), 'tiled');
    assert.throws(() => attentionPath(rt, { ...d, hd: 30 }, { path: 'uniform' }), /attention: the uniform kernels need a head dim/);
  });

  test('tiled kernels (the real-GPU path) match the reference', slow, async () => {
    const cases: AttentionCase[] = [
      { b: 2, hq: 4, hkv: 2, tq: 17, hd: 32, pad: [0, 5] },
      { b: 1, hq: 2, hkv: 1, tq: 3, s: 9, sCap: 12, hd: 64, pad: [2] },
      { b: 2, hq: 2, hkv: 2, tq: 6, hd: 32, pad: [1, 0], causal: false },
    ];
    for (const [n, c] of cases.entries()) await checkLaunch(c, 300 + 10 * n, { path: 'tiled', decode: false });
  });

  test('the decode kernel (one workgroup per query row and head group) matches the reference: chunks of keys, padding, full attention', slow, async () => {
    const cases: AttentionCase[] = [
      { b: 2, hq: 4, hkv: 2, tq: 1, s: 17, sCap: 20, hd: 64, pad: [0, 5] },
      { b: 1, hq: 2, hkv: 1, tq: 3, s: 9, sCap: 12, hd: 32, pad: [2] },
      // Many chunks of keys: the online softmax carries across them.
      { b: 1, hq: 2, hkv: 1, tq: 2, s: 300, sCap: 310, hd: 32, pad: [3] },
      // Qwen2.5-0.5B's group of 7 query heads to a kv head, a cache of 133 keys.
      { b: 2, hq: 14, hkv: 2, tq: 1, s: 133, sCap: 140, hd: 64, pad: [0, 37] },
      // A group of 9: two workgroups of 5 slots, the second with 4 heads.
      { b: 1, hq: 9, hkv: 1, tq: 1, s: 70, hd: 32, pad: [5] },
      // A head dim that divides nothing in particular.
      { b: 1, hq: 3, hkv: 3, tq: 2, s: 19, hd: 48, pad: [1] },
      // Batch row 1 is all padding up to its last query: no visible key for its first row.
      { b: 2, hq: 2, hkv: 2, tq: 2, s: 6, hd: 128, pad: [0, 5] },
      { b: 2, hq: 2, hkv: 2, tq: 4, s: 10, hd: 32, pad: [1, 0], causal: false, scale: 0.3 },
      { b: 1, hq: 1, hkv: 1, tq: 1, s: 5, hd: 256 },
    ];
    for (const [n, c] of cases.entries()) await checkLaunch(c, 500 + 10 * n, { path: 'tiled', decode: true });
    // Keys cut into parts, each a workgroup, added up by decode_combine: parts shorter
    // than a chunk, parts past the visible keys (left padding, causal rows), a group of 7.
    for (const [n, c] of cases.slice(0, 5).entries()) {
      for (const decodeParts of [2, 5]) await checkLaunch(c, 700 + 10 * n + decodeParts, { path: 'tiled', decode: true, decodeParts });
    }
    // Longer chunks (attention.decodeChunk): a partial last chunk, several chunks, parts.
    for (const decodeChunk of [128, 256]) {
      await withPolicy(await gpu(), { attention: { decodeChunk } }, async () => {
        for (const [n, c] of [cases[2], cases[3]].entries()) {
          await checkLaunch(c, 900 + 10 * n + decodeChunk, { path: 'tiled', decode: true });
          await checkLaunch(c, 950 + 10 * n + decodeChunk, { path: 'tiled', decode: true, decodeParts: 2 });
        }
      });
    }
    assert.deepEqual(decodeShape({ maxComputeWorkgroupStorageSize: 49152 }, 64, 7, 128), { gp: 7, ch: 64 }, 'the 0.5B group of 7: 128 keys a chunk fit 48 KiB but are more than a lane carries');
    assert.deepEqual(decodeShape({ maxComputeWorkgroupStorageSize: 32768 }, 64, 12, 64), { gp: 6, ch: 64 }, 'a group of 12 in two blocks of 6');
    assert.equal(decodeShape({ maxComputeWorkgroupStorageSize: 32768 }, 256, 1, 64)?.ch, 4, 'head dim 256 alone: 4 keys a chunk');
    assert.equal(decodeShape({ maxComputeWorkgroupStorageSize: 32768 }, 66, 1, 64), null, 'a head dim not a multiple of 4');
    assert.equal(decodeShape({ maxComputeWorkgroupStorageSize: 16384 }, 64, 7, 256)?.ch, 32, 'halved until the keys fit');
    assert.throws(() => decodeShape({ maxComputeWorkgroupStorageSize: 49152 }, 64, 7, 100), /attention.decodeChunk: 100/);
    // The 0.5B shapes, 420 keys: workgroups of 7 heads x 32 invocations, one a row and kv head.
    assert.deepEqual(decodeParts(2 * 224, 420, 64, 65536), { parts: 7, keys: 64 }, 'batch 1: a part a chunk');
    assert.deepEqual(decodeParts(64 * 224, 420, 64, 65536), { parts: 4, keys: 128 });
    assert.deepEqual(decodeParts(256 * 224, 420, 64, 65536), { parts: 2, keys: 256 }, 'a rollout\'s 128 rows');
    assert.deepEqual(decodeParts(256 * 224, 420, 64, 32768), { parts: 1, keys: 0 }, 'rows that fill the target whole');
    const rt = await gpu();
    const d = { b: 1, hq: 1, hkv: 1, tq: 1, s: 4, sCap: 4, hd: 320, scale: 1, causal: true };
    await scopeAsync(async () => {
      const t = empty([2048]).buffer;
      assert.throws(() => attentionForward(rt, d, t, t, t, null, empty([320]).buffer, empty([4]).buffer, { path: 'tiled', decode: true }),
        /attention: the decode kernel takes head dims that are multiples of 4 up to 256 .*, got 320/);
    });
  });

  test('blocked kernels match the reference: several query and key tiles, grouped-query partials, padding, a cache', slow, async () => {
    const cases: AttentionCase[] = [
      // Two query tiles of 32 and three key tiles of 16 (dq) or two of 32; group 2.
      { b: 2, hq: 4, hkv: 2, tq: 37, hd: 64, pad: [0, 5] },
      // Group 3: three partials per kv head summed; the padding ends inside a key tile.
      { b: 1, hq: 3, hkv: 1, tq: 20, hd: 64, pad: [7] },
      // One query head per kv head: dk, dv written directly; full attention.
      { b: 2, hq: 2, hkv: 2, tq: 18, hd: 64, pad: [1, 0], causal: false, scale: 0.3 },
      // Queries at the last positions of a cache with spare capacity (zeroed dk, dv rows).
      { b: 1, hq: 2, hkv: 1, tq: 3, s: 40, sCap: 44, hd: 64, pad: [2] },
      // Batch row 1 is padding throughout: zero outputs and gradients.
      { b: 2, hq: 2, hkv: 1, tq: 6, hd: 64, pad: [0, 6] },
    ];
    for (const [n, c] of cases.entries()) await checkLaunch(c, 600 + 10 * n, { path: 'blocked', decode: false });
  });

  test('the blocked path: head dims 64 and 128 where workgroup memory allows; taken when asked, and by default on real GPUs', async () => {
    const small = { maxComputeWorkgroupStorageSize: 32768, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256 };
    const large = { ...small, maxComputeWorkgroupStorageSize: 65536 };
    assert.equal(blockedFits(small, 64), true);
    assert.equal(blockedFits(small, 128), false);
    assert.equal(blockedFits(large, 128), true);
    assert.equal(blockedFits(large, 32), false);
    assert.equal(blockedFits({ ...small, maxComputeInvocationsPerWorkgroup: 64 }, 64), false);
    for (const pass of ['forward', 'dq', 'dkv'] as const) assert.ok(blockedSharedBytes(pass, 64) <= 32768, pass);
    const rt = await gpu();
    const d = { b: 1, hq: 2, hkv: 1, tq: 8, s: 8, sCap: 8, hd: 64, scale: 0.125, causal: true };
    await withPolicy(rt, { attention: { path: 'blocked' } }, () => {
      assert.equal(attentionPath(rt, d), 'blocked');
      assert.equal(attentionPath(rt, d, { path: 'tiled' }), 'tiled');
      assert.throws(() => attentionPath(rt, { ...d, hd: 32 }), /attention: the blocked kernels need a head dim of 64 or 128 .* got 32/);
    });
    assert.equal(attentionPath(rt, d), rt.caps.compatibility ? 'uniform' : blockedFits(rt.gpu.limits, 64) ? 'blocked' : 'tiled');
    assert.equal(attentionPath(rt, { ...d, hd: 32 }), rt.caps.compatibility ? 'uniform' : 'tiled');
  });

  test('uniform kernels match the reference across several windows', slow, async () => {
    const cases: [AttentionCase, number][] = [
      // The padding ends inside the second window; the third row of batch 1 is all padding.
      [{ b: 3, hq: 4, hkv: 2, tq: 19, hd: 32, pad: [0, 6, 19] }, 4],
      [{ b: 1, hq: 3, hkv: 1, tq: 33, hd: 64, pad: [7] }, 8],
      [{ b: 2, hq: 2, hkv: 2, tq: 9, hd: 32, pad: [2, 0], causal: false, scale: 0.3 }, 4],
      // Decoding: queries at the last positions of a cache with spare capacity.
      [{ b: 2, hq: 2, hkv: 1, tq: 3, s: 11, sCap: 14, hd: 32, pad: [4, 0] }, 3],
      [{ b: 1, hq: 2, hkv: 1, tq: 1, s: 17, hd: 64, pad: [5] }, 5],
      [{ b: 1, hq: 2, hkv: 1, tq: 6, hd: 128, pad: [1] }, 2],
    ];
    for (const [n, [c, rows]] of cases.entries()) {
      await checkLaunch(c, 400 + 10 * n, { path: 'uniform', windowRows: rows });
      await checkLaunch(c, 400 + 10 * n, { path: 'uniform' });
    }
  });
});

