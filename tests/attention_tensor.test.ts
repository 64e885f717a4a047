import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as ref from '../src/reference/attention.ts';
import { roundToF16 } from '../src/reference/matmul_f16.ts';
import type { Runtime } from '../src/gpu/runtime.ts';
import { attentionForwardTensor, forwardTakesTensorCores, tensorAttentionBytes, tensorAttentionMissing, tensorAttentionSubgroups } from '../src/kernels/attention_tensor.ts';
import { attentionBackwardTensor, backwardTakesTensorCores, tensorBackwardBytes, tensorBackwardMissing, tensorBackwardSubgroups, trainingTakesTensorCores } from '../src/kernels/attention_tensor_backward.ts';
import type { AttentionDims } from '../src/kernels/attention_params.ts';
import { gpuOptions } from '../src/cli/gpu_args.ts';
import { TRAINING_FORWARD } from '../src/gpu/kernel_policy.ts';
import { noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { attention } from '../src/tensor/ops/attention.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { empty, tensor } from '../src/tensor/tensor.ts';
import { randn } from '../src/util/random.ts';
import { assertClose, gpu, gradCheck, read, withPolicy } from './support/gpu.ts';
import { attentionInputs, attentionRefDims, type AttentionCase } from './support/attention_cases.ts';

// The kernels (forward and backward) need f16 subgroup matrices, which the software GPU
// lacks (on the H200: WEBGPU_TOGGLES=allow_unsafe_apis,vulkan_enable_f16_on_nvidia):
// there their tests are skipped with the reason, and the reference and selection tests
// still run.
let rt: Runtime;
let missing: string | null;
try {
  rt = await gpu();
  missing = tensorAttentionMissing(rt, 64);
} catch (e) {
  missing = `no GPU: ${(e as Error).message}`;
}
if (missing) console.log(`attention_tensor: GPU tests skipped: ${missing}`);
const onDevice = { skip: missing ?? false, timeout: 300_000 };
const backwardMissing = missing ?? tensorBackwardMissing(rt!, 64);
const backwardOnDevice = { skip: backwardMissing ?? false, timeout: 300_000 };

/** The launcher's view of a case. */
const dims = (c: AttentionCase): AttentionDims => {
  const s = c.s ?? c.tq;
  return { b: c.b, hq: c.hq, hkv: c.hkv, tq: c.tq, s, sCap: c.sCap ?? s, hd: c.hd, scale: c.scale ?? 1 / Math.sqrt(c.hd), causal: c.causal ?? true };
};

/** A case's inputs with q and k times `qkScale` (doubled: scores large enough for f16 rounding to show). */
function inputs(c: AttentionCase, seed: number, qkScale = 2) {
  return { d: dims(c), ...attentionInputs(c, seed, qkScale) };
}

describe('f16 attention reference (CPU)', () => {
  test('one query row by hand: rounded operands, unnormalised probabilities rounded before they weight v', () => {
    // q = [1, 0], keys [0.1, 0] and [0.2, 0] (0.1 and 0.2 are not f16 values), scale 1,
    // not causal: s = f16(0.1), f16(0.2), the max s1; e = exp(s - s1) rounded to f16
    // weights f16(v), and the exact sum of e divides out after.
    const q = Float32Array.of(1, 0);
    const k = Float32Array.of(0.1, 0, 0.2, 0);
    const v = Float32Array.of(1 / 3, 0, 0, 2 / 3);
    const d = { b: 1, hq: 1, hkv: 1, tq: 1, sCap: 2, hd: 2, scale: 1, causal: false };
    const [s0, s1] = [roundToF16(0.1), roundToF16(0.2)];
    const e0 = Math.exp(s0 - s1);
    const sum = e0 + 1;
    const got = ref.attentionForwardF16(d, q, k, v);
    assert.ok(Math.abs(got.lse[0] - (s1 + Math.log(sum))) < 1e-6);
    assert.ok(Math.abs(got.o[0] - (roundToF16(e0) * roundToF16(1 / 3)) / sum) < 1e-7);
    assert.ok(Math.abs(got.o[1] - roundToF16(2 / 3) / sum) < 1e-7);
    assert.notEqual(roundToF16(e0), Math.fround(e0), 'the rounding shows');
  });

  test('stays within f16 rounding of the exact attention, masking alike', () => {
    const c: AttentionCase = { b: 2, hq: 4, hkv: 2, tq: 19, s: 30, sCap: 32, hd: 16, pad: [0, 12] };
    const { d, q, k, v } = inputs(c, 11);
    const exact = ref.attentionForward(attentionRefDims(c, d.sCap), q, k, v);
    const half = ref.attentionForwardF16(attentionRefDims(c, d.sCap), q, k, v);
    // Scores of |q k| up to ~20 move by ~2^-10 of that; outputs of |v| up to ~4 by a few 2^-11.
    assertClose(half.o, exact.o, { atol: 2e-2, rtol: 0, label: 'o' });
    assertClose(half.lse, exact.lse, { atol: 2e-2, rtol: 0, label: 'lse' });
    for (let i = 0; i < exact.o.length; i++) if (exact.o[i] === 0) assert.equal(half.o[i], 0, `masked output ${i}`);
  });
});

describe('f16 attention backward reference (CPU)', () => {
  test('stays within f16 rounding of the exact backward, with the scale sigma applied and undone', () => {
    const c: AttentionCase = { b: 2, hq: 4, hkv: 2, tq: 19, s: 30, sCap: 32, hd: 16, pad: [0, 12] };
    const { d, q, k, v } = inputs(c, 31);
    const rd = attentionRefDims(c, d.sCap);
    // dO far below f16's smallest normal (6e-5): sigma brings it back into range.
    const dO = randn(q.length, 34, 1e-7);
    const fwd = ref.attentionForward(rd, q, k, v);
    const exact = ref.attentionBackward(rd, q, k, v, dO);
    const half = ref.attentionBackwardF16(rd, q, k, v, dO, fwd);
    for (const key of ['dq', 'dk', 'dv'] as const) {
      const scale = Math.max(...exact[key].map(Math.abs));
      assert.ok(scale > 1e-8, `${key} is not all zeros`);
      assertClose(half[key], exact[key], { atol: 1e-2 * scale, rtol: 0, label: key });
    }
    // The second batch row's padding: its first query row and first 12 keys get nothing.
    const row = (b: number, h: number, i: number, heads: number, rows: number) => ((b * heads + h) * rows + i) * c.hd;
    for (let h = 0; h < c.hq; h++) assert.ok(half.dq.subarray(row(1, h, 0, c.hq, c.tq), row(1, h, 1, c.hq, c.tq)).every((x) => x === 0), `dq head ${h}`);
    for (let h = 0; h < c.hkv; h++) {
      assert.ok(half.dk.subarray(row(1, h, 0, c.hkv, d.sCap), row(1, h, 12, c.hkv, d.sCap)).every((x) => x === 0), `dk head ${h}`);
      assert.ok(half.dv.subarray(row(1, h, 0, c.hkv, d.sCap), row(1, h, 12, c.hkv, d.sCap)).every((x) => x === 0), `dv head ${h}`);
    }
  });
});

describe('tensor-core attention: fit and selection', () => {
  test('workgroup memory and subgroups: four where 48 KiB allows, fewer where less does', () => {
    assert.equal(tensorAttentionBytes(64, 4), 2 * ((64 + 64) * 72 + 4 * 16 * 40 - 8) + 4 * 4 * 16 * 32 + 16);
    const limits = (bytes: number) => ({ maxComputeWorkgroupStorageSize: bytes, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256 });
    assert.equal(tensorAttentionSubgroups(limits(49152), 64), 4);
    assert.equal(tensorAttentionSubgroups(limits(49152), 128), 4);
    assert.equal(tensorAttentionSubgroups(limits(32768), 128), 2);
    assert.equal(tensorAttentionSubgroups(limits(28000), 128), 1);
    assert.equal(tensorAttentionSubgroups(limits(16384), 128), null);
    assert.equal(tensorAttentionSubgroups(limits(49152), 40), null, 'head dims are multiples of 16');
    assert.equal(tensorAttentionSubgroups(limits(65536), 256), null, 'up to 128');
  });

  test('taken by large forwards no backward follows, past decode widths, where the device can, unless recorded as a training forward', async () => {
    const r = await gpu();
    const d = dims({ b: 1, hq: 2, hkv: 1, tq: 64, hd: 64 });
    const can = tensorAttentionMissing(r, 64) === null;
    const large = { ...d, b: 64, tq: 512, s: 512, sCap: 512 };
    assert.equal(forwardTakesTensorCores(r, large), can, 'on by default where the device can');
    assert.equal(forwardTakesTensorCores(r, d), false, 'under 2^24 scores: the f32 kernels');
    await withPolicy(r, { attention: { tensorForwardMinScores: 0 } }, () => {
      assert.equal(forwardTakesTensorCores(r, d), can);
      assert.equal(forwardTakesTensorCores(r, { ...d, tq: 8, s: 8, sCap: 8 }), false, 'a decode step');
    });
    await withPolicy(r, TRAINING_FORWARD, () => assert.equal(forwardTakesTensorCores(r, large), false, 'recorded as a training forward'));
    await withPolicy(r, { tensorCores: { enabled: false } }, () => assert.equal(forwardTakesTensorCores(r, large), false));
    if (!can) {
      assert.throws(() => attentionForwardTensor(r, d, empty([64]).buffer, empty([64]).buffer, empty([64]).buffer, null, empty([64]).buffer, empty([64]).buffer),
        /attention: the tensor-core attention needs/);
    }
    assert.equal(gpuOptions({ 'attention-tensor': 'on' }).policy?.attention?.tensorForward, true);
    assert.equal(gpuOptions({ 'attention-tensor': 'off' }).policy?.attention?.tensorForward, false);
    assert.equal(gpuOptions({}).policy?.attention && 'tensorForward' in gpuOptions({}).policy!.attention!, false, 'left to the policy when not given');
    assert.throws(() => gpuOptions({ 'attention-tensor': 'yes' }), /--attention-tensor must be on or off, got "yes"/);
  });
});

describe('tensor-core attention backward: fit and selection', () => {
  test('workgroup memory and subgroups: head dims 16-64, four subgroups in 32 KiB', () => {
    assert.equal(tensorBackwardBytes(64, 4), 2 * (64 * 72 + 2 * 4 * 16 * 40) + 4 * (4 * 16 * 32 + 128));
    const limits = (bytes: number) => ({ maxComputeWorkgroupStorageSize: bytes, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256 });
    assert.equal(tensorBackwardSubgroups(limits(32768), 64), 4);
    assert.equal(tensorBackwardSubgroups(limits(24000), 64), 2);
    assert.equal(tensorBackwardSubgroups(limits(16384), 64), 1);
    assert.equal(tensorBackwardSubgroups(limits(12000), 64), null);
    assert.equal(tensorBackwardSubgroups(limits(65536), 128), null, 'up to 64');
    assert.equal(tensorBackwardSubgroups(limits(65536), 40), null, 'multiples of 16');
  });

  test('taken by large backwards, and their forwards, where the device can, unless the policy says no, never at decode widths or without gradient tensor cores', async () => {
    const r = await gpu();
    const can = tensorBackwardMissing(r, 64) === null;
    const large = { ...dims({ b: 16, hq: 4, hkv: 2, tq: 1024, hd: 64 }) };
    assert.equal(backwardTakesTensorCores(r, large), can, 'on by default where the device can');
    assert.equal(trainingTakesTensorCores(r, large), false, 'taped forwards: f32 by default');
    await withPolicy(r, { attention: { tensorTrainingForward: true } }, () => {
      assert.equal(trainingTakesTensorCores(r, large), can && tensorAttentionMissing(r, 64) === null, 'taped forwards with their backward where asked');
    });
    await withPolicy(r, { attention: { tensorBackward: false, tensorTrainingForward: true } }, () => {
      assert.equal(backwardTakesTensorCores(r, large), false, 'unless the policy says no');
      assert.equal(trainingTakesTensorCores(r, large), false, 'and their forwards with it');
    });
    await withPolicy(r, { attention: { tensorBackward: true } }, async () => {
      assert.equal(backwardTakesTensorCores(r, large), can);
      assert.equal(backwardTakesTensorCores(r, dims({ b: 1, hq: 2, hkv: 1, tq: 64, hd: 64 })), false, 'under 2^24 scores');
      await withPolicy(r, { attention: { tensorBackwardMinScores: 0 } }, () => {
        assert.equal(backwardTakesTensorCores(r, dims({ b: 1, hq: 2, hkv: 1, tq: 64, hd: 64 })), can);
        assert.equal(backwardTakesTensorCores(r, dims({ b: 1, hq: 2, hkv: 1, tq: 8, hd: 64 })), false, 'a decode width');
        assert.equal(backwardTakesTensorCores(r, dims({ b: 1, hq: 2, hkv: 1, tq: 64, hd: 128 })), false, 'head dim 128');
      });
      await withPolicy(r, { tensorCores: { gradients: false } }, () => assert.equal(backwardTakesTensorCores(r, large), false));
    });
    if (!can) {
      const buf = () => empty([64]).buffer;
      assert.throws(() => attentionBackwardTensor(r, large, buf(), buf(), buf(), null, buf(), buf(), buf(), buf(), { dq: buf(), dk: null, dv: null }),
        /attention: the tensor-core attention backward needs/);
    }
  });
});

describe('tensor-core attention on the GPU', () => {
  const cases: AttentionCase[] = [
    { b: 1, hq: 2, hkv: 1, tq: 64, hd: 64 },
    { b: 2, hq: 4, hkv: 2, tq: 100, hd: 64, pad: [0, 37] },
    { b: 2, hq: 2, hkv: 2, tq: 45, s: 300, sCap: 320, hd: 64, pad: [3, 290] },
    { b: 1, hq: 2, hkv: 1, tq: 33, s: 50, hd: 64, pad: [7], causal: false },
    { b: 2, hq: 2, hkv: 1, tq: 20, hd: 128, pad: [0, 20] },
    { b: 1, hq: 4, hkv: 2, tq: 130, hd: 128 },
    { b: 1, hq: 2, hkv: 2, tq: 40, hd: 32, pad: [5] },
    { b: 1, hq: 1, hkv: 1, tq: 17, hd: 16 },
  ];

  /** o and lse of the kernel for a case, with o's buffer filled with NaN first so an element the kernel forgets shows. */
  async function runKernel(c: AttentionCase, d: AttentionDims, q: Float32Array, k: Float32Array, v: Float32Array) {
    return scopeAsync(async () => {
      const o = empty([c.b, c.hq, c.tq, c.hd]);
      const lse = empty([c.b, c.hq, c.tq]);
      rt.device.queue.writeBuffer(o.buffer, 0, new Float32Array(c.b * c.hq * c.tq * c.hd).fill(Number.NaN));
      const pad = c.pad ? tensor(Int32Array.from(c.pad), [c.b]) : null;
      attentionForwardTensor(rt, d, tensor(q, [c.b, c.hq, c.tq, c.hd]).buffer, tensor(k, [c.b, c.hkv, d.sCap, c.hd]).buffer,
        tensor(v, [c.b, c.hkv, d.sCap, c.hd]).buffer, pad?.buffer ?? null, o.buffer, lse.buffer);
      return { o: await read(o), lse: await read(lse) };
    });
  }

  test('o and lse match the f16 reference: grouped-query heads, padding (a row wholly), a cache, full attention, head dims 16-128', onDevice, async () => {
    for (const [n, c] of cases.entries()) {
      const { d, q, k, v } = inputs(c, 700 + 10 * n);
      const want = ref.attentionForwardF16(attentionRefDims(c, d.sCap), q, k, v);
      const got = await runKernel(c, d, q, k, v);
      const label = `case ${n} ${JSON.stringify(c)}`;
      // f32 sums in another order than the reference's.
      assertClose(got.o, want.o, { atol: 2e-3, rtol: 2e-3, label: `${label} o` });
      assertClose(got.lse, want.lse, { atol: 1e-4, rtol: 1e-5, label: `${label} lse` });
    }
  });

  test('rows whose max passes the reference max by more than the threshold in a later tile rescale their accumulators', onDevice, async () => {
    // q and k times 6: scores of standard deviation about 36, so most rows' max grows by
    // more than 8 after their first key tile; the f16 reference takes the true max.
    const c: AttentionCase = { b: 2, hq: 4, hkv: 2, tq: 160, hd: 64, pad: [0, 45] };
    const { d, q, k, v } = inputs(c, 1300, 6);
    const want = ref.attentionForwardF16(attentionRefDims(c, d.sCap), q, k, v);
    const got = await runKernel(c, d, q, k, v);
    assertClose(got.o, want.o, { atol: 2e-3, rtol: 2e-3, label: 'o' });
    assertClose(got.lse, want.lse, { atol: 1e-3, rtol: 1e-5, label: 'lse' });
  });

  test('the op takes it under noGrad, and with gradients or as a training forward where the policy asks and the backward takes tensor cores', onDevice, async () => {
    const c: AttentionCase = { b: 2, hq: 4, hkv: 2, tq: 96, hd: 64, pad: [0, 9] };
    const { d, q, k, v } = inputs(c, 900);
    const half = ref.attentionForwardF16(attentionRefDims(c, d.sCap), q, k, v);
    const exact = ref.attentionForward(attentionRefDims(c, d.sCap), q, k, v);
    const onTensorCores = !backwardMissing;
    const policy = { tensorForward: true, tensorForwardMinScores: 0, tensorBackwardMinScores: 0 };
    for (const [tensorBackward, tensorTrainingForward] of [[true, true], [true, false], [false, true]]) {
      await withPolicy(rt, { attention: { ...policy, tensorBackward, tensorTrainingForward } }, () => scopeAsync(async () => {
        const padLeft = tensor(Int32Array.from(c.pad!), [c.b]);
        const qt = requireGrad(tensor(q, [c.b, c.hq, c.tq, c.hd]));
        const kt = tensor(k, [c.b, c.hkv, c.tq, c.hd]);
        const vt = tensor(v, [c.b, c.hkv, c.tq, c.hd]);
        const scored = await read(noGrad(() => attention(qt, kt, vt, { padLeft })));
        assertClose(scored, half.o, { atol: 2e-3, rtol: 2e-3, label: 'noGrad: tensor cores' });
        const graded = await read(attention(qt, kt, vt, { padLeft }));
        const training = await read(await withPolicy(rt, TRAINING_FORWARD, () => noGrad(() => attention(qt, kt, vt, { padLeft }))));
        assert.deepEqual(training, graded, 'a training forward computes as the taped one');
        if (tensorBackward && tensorTrainingForward && onTensorCores) assert.deepEqual(graded, scored, 'with the tensor-core backward, asked for: the tensor-core forward');
        else assertClose(graded, exact.o, { atol: 2e-5, rtol: 1e-4, label: 'otherwise f32' });
      }));
    }
  });
});

describe('tensor-core attention backward on the GPU', () => {
  const cases: AttentionCase[] = [
    { b: 1, hq: 2, hkv: 1, tq: 64, hd: 64 },
    { b: 2, hq: 4, hkv: 2, tq: 100, hd: 64, pad: [0, 37] },
    { b: 2, hq: 2, hkv: 2, tq: 45, s: 300, sCap: 320, hd: 64, pad: [3, 290] },
    { b: 1, hq: 2, hkv: 1, tq: 33, s: 50, hd: 64, pad: [7], causal: false },
    { b: 2, hq: 7, hkv: 1, tq: 70, hd: 64, pad: [0, 70] },
    { b: 1, hq: 4, hkv: 2, tq: 130, hd: 32, pad: [5] },
    { b: 1, hq: 1, hkv: 1, tq: 17, hd: 16 },
  ];

  /** dq, dk, dv of the kernel from the reference forward's o and lse, each gradient buffer filled with NaN first. */
  async function runKernel(c: AttentionCase, d: AttentionDims, x: { q: Float32Array; k: Float32Array; v: Float32Array }, dO: Float32Array, fwd: { o: Float32Array; lse: Float32Array }, only?: 'dq' | 'dkv') {
    return scopeAsync(async () => {
      const nan = (shape: number[]) => {
        const t = empty(shape);
        rt.device.queue.writeBuffer(t.buffer, 0, new Float32Array(t.size).fill(Number.NaN));
        return t;
      };
      const dq = only === 'dkv' ? null : nan([c.b, c.hq, c.tq, c.hd]);
      const dk = only === 'dq' ? null : nan([c.b, c.hkv, d.sCap, c.hd]);
      const dv = only === 'dq' ? null : nan([c.b, c.hkv, d.sCap, c.hd]);
      const pad = c.pad ? tensor(Int32Array.from(c.pad), [c.b]) : null;
      const qShape = [c.b, c.hq, c.tq, c.hd];
      const kvShape = [c.b, c.hkv, d.sCap, c.hd];
      attentionBackwardTensor(rt, d, tensor(x.q, qShape).buffer, tensor(x.k, kvShape).buffer, tensor(x.v, kvShape).buffer, pad?.buffer ?? null,
        tensor(fwd.o, qShape).buffer, tensor(dO, qShape).buffer, tensor(fwd.lse, [c.b, c.hq, c.tq]).buffer, empty([c.b, c.hq, c.tq]).buffer,
        { dq: dq?.buffer ?? null, dk: dk?.buffer ?? null, dv: dv?.buffer ?? null });
      return { dq: dq && (await read(dq)), dk: dk && (await read(dk)), dv: dv && (await read(dv)) };
    });
  }

  test('dq, dk and dv match the f16 reference: grouped-query heads, padding (a row wholly), a cache, full attention, head dims 16-64', backwardOnDevice, async () => {
    for (const [n, c] of cases.entries()) {
      const { d, q, k, v } = inputs(c, 1500 + 10 * n);
      const rd = attentionRefDims(c, d.sCap);
      const dO = randn(q.length, 1505 + 10 * n, 1e-3);
      const fwd = ref.attentionForward(rd, q, k, v);
      const want = ref.attentionBackwardF16(rd, q, k, v, dO, fwd);
      const got = await runKernel(c, d, { q, k, v }, dO, fwd);
      for (const key of ['dq', 'dk', 'dv'] as const) {
        const scale = Math.max(...want[key].map(Math.abs));
        // f32 sums in another order than the reference's; an f16 rounding of P or dS may land one step apart.
        assertClose(got[key]!, want[key], { atol: 2e-3 * scale, rtol: 2e-3, label: `case ${n} ${JSON.stringify(c)} ${key}` });
      }
    }
  });

  test('only the gradients asked for: dq alone, dk and dv alone', backwardOnDevice, async () => {
    const c: AttentionCase = { b: 2, hq: 4, hkv: 2, tq: 80, hd: 64, pad: [0, 11] };
    const { d, q, k, v } = inputs(c, 1600);
    const rd = attentionRefDims(c, d.sCap);
    const dO = randn(q.length, 1601);
    const fwd = ref.attentionForward(rd, q, k, v);
    const want = ref.attentionBackwardF16(rd, q, k, v, dO, fwd);
    const onlyQ = await runKernel(c, d, { q, k, v }, dO, fwd, 'dq');
    assert.equal(onlyQ.dk, null);
    assertClose(onlyQ.dq!, want.dq, { atol: 2e-3 * Math.max(...want.dq.map(Math.abs)), rtol: 2e-3, label: 'dq' });
    const onlyKv = await runKernel(c, d, { q, k, v }, dO, fwd, 'dkv');
    assert.equal(onlyKv.dq, null);
    assertClose(onlyKv.dv!, want.dv, { atol: 2e-3 * Math.max(...want.dv.map(Math.abs)), rtol: 2e-3, label: 'dv' });
  });

  test('the op takes it when the policy asks: finite differences of the f32 forward, and the f32 backward within f16 rounding', backwardOnDevice, async () => {
    const [b, hq, hkv, t, hd] = [2, 4, 2, 40, 64];
    await withPolicy(rt, { attention: { tensorBackward: true, tensorBackwardMinScores: 0 } }, async () => {
      const padLeft = tensor(Int32Array.from([0, 6]), [b]);
      await gradCheck((q, k, v) => attention(q, k, v, { padLeft }), [
        { data: randn(b * hq * t * hd, 1700), shape: [b, hq, t, hd] },
        { data: randn(b * hkv * t * hd, 1701), shape: [b, hkv, t, hd] },
        { data: randn(b * hkv * t * hd, 1702), shape: [b, hkv, t, hd] },
      ], { probe: 8, atol: 5e-3, rtol: 3e-2, label: 'attention, tensor-core backward' });
    });
  });
});
