import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import type { Runtime } from '../src/gpu/runtime.ts';
import { shaderSource } from '../src/gpu/shader_source.ts';
import * as kt from '../src/kernels/matmul/tensor.ts';
import { f16ToF32, f32ToF16 } from '../src/util/half.ts';
import * as ref from '../src/reference/matmul.ts';
import { gradScale as gradScaleRef } from '../src/reference/grad_scale.ts';
import { F16_MAX, matmulF16, matmulF16Tolerance, roundArrayToF16, roundScaledToF16, roundToF16 } from '../src/reference/matmul_f16.ts';
import { randn, mulberry32 } from '../src/util/random.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { headOnSkinny } from '../src/models/qwen_decode.ts';
import { forwardMatmul, gradientMatmuls, gradientUsesTensorCores, tensorCoreNote, usesTensorCores } from '../src/kernels/matmul/precision.ts';
import { backward, requireGrad } from '../src/tensor/autograd.ts';
import { linear } from '../src/tensor/ops/matmul.ts';
import { gpuOptions } from '../src/cli/gpu_args.ts';
import { mul, sum } from '../src/tensor/ops/index.ts';
import { assertClose, gpu, read, withPolicy } from './support/gpu.ts';

// The GPU tests need f16 subgroup matrices, which neither the software GPU nor an
// NVIDIA GPU without Dawn's unsafe toggles offers (on the H200: WEBGPU_TOGGLES=
// allow_unsafe_apis,vulkan_enable_f16_on_nvidia): there they are skipped with the
// reason, and the CPU reference tests still run.
let rt: Runtime;
let missing: string | null;
try {
  rt = await gpu();
  missing = kt.tensorMatmulMissing(rt);
} catch (e) {
  missing = `no GPU: ${(e as Error).message}`;
}
if (missing) console.log(`matmul_tensor: GPU tests skipped: ${missing}`);
const onDevice = { skip: missing ?? false, timeout: 300_000 };

const TRANS: [boolean, boolean][] = [[false, false], [true, false], [false, true], [true, true]];
const TILES = Object.keys(kt.TENSOR_TILES) as kt.TensorTile[];

const f16Bits = (x: number) => f16ToF32(f32ToF16(Float32Array.of(x)))[0];

describe('f16-rounded matmul reference (CPU)', () => {
  test('roundToF16 agrees with the bit-level encoder on every f16 value, every midpoint and its neighbours', () => {
    const halves = f16ToF32(Uint16Array.from({ length: 65536 }, (_, i) => i));
    const finite = [...halves].filter(Number.isFinite).sort((x, y) => x - y);
    for (const h of halves) {
      if (Number.isNaN(h)) assert.ok(Number.isNaN(roundToF16(h)));
      else assert.ok(Object.is(roundToF16(h), h), `f16 value ${h} is not kept`);
    }
    const probe = new Float32Array(3);
    for (let i = 0; i + 1 < finite.length; i++) {
      if (finite[i] === finite[i + 1]) continue; // +0 and -0
      // The midpoint of two f16 neighbours needs 12 significant bits: exact in f32.
      const mid = (finite[i] + finite[i + 1]) / 2;
      probe[0] = mid;
      probe[1] = mid;
      probe[2] = mid;
      const bits = new Uint32Array(probe.buffer);
      if (mid !== 0) {
        bits[1] -= 1; // one f32 ulp towards zero
        bits[2] += 1; // one f32 ulp away from zero
      }
      for (const x of probe) assert.equal(roundToF16(x), f16Bits(x), `rounding ${x}`);
    }
  });

  test('roundToF16 on random f32 values of every magnitude, and the edges of the range', () => {
    const r = mulberry32(11);
    for (let i = 0; i < 200_000; i++) {
      const x = Math.fround((r() < 0.5 ? -1 : 1) * r() * 2 ** Math.floor(r() * 60 - 40));
      assert.equal(roundToF16(x), f16Bits(x), `rounding ${x}`);
    }
    assert.equal(roundToF16(1 + 2 ** -11), 1, 'a tie rounds to the even neighbour, down');
    assert.equal(roundToF16(1 + 3 * 2 ** -11), 1 + 2 ** -9, 'a tie rounds to the even neighbour, up');
    assert.equal(roundToF16(65519), F16_MAX);
    assert.equal(roundToF16(65520), Infinity, 'halfway past the largest f16 overflows');
    assert.equal(roundToF16(-1e6), -Infinity);
    assert.equal(roundToF16(2 ** -25), 0, 'half the smallest subnormal ties to zero');
    assert.equal(roundToF16(1.5 * 2 ** -25), 2 ** -24);
    assert.ok(Object.is(roundToF16(-(2 ** -30)), -0));
    assert.ok(Object.is(roundToF16(-0), -0));
    assert.ok(Number.isNaN(roundToF16(NaN)));
  });

  test('matmulF16 is the f32 reference on rounded operands; the tolerance admits f32 summation and rejects f32 operands', () => {
    for (const [m, n, k, transA, transB] of [[17, 33, 45, false, true], [13, 20, 200, true, false]] as const) {
      const a = randn(m * k, 3);
      const b = randn(k * n, 4);
      const args = { a, b, m, n, k, transA, transB };
      const want = matmulF16(args);
      assert.deepEqual(want, ref.matmul({ ...args, a: roundArrayToF16(a), b: roundArrayToF16(b) }));
      const tol = matmulF16Tolerance(args);
      // The kernel's order, pessimistically: each 16-deep step aligns its products and
      // the accumulator to the largest of them and truncates to f32 precision, then
      // truncates the sum (what tensor cores do, by published measurements).
      const ra = roundArrayToF16(a);
      const rb = roundArrayToF16(b);
      const truncTo = (x: number, ulp: number) => Math.trunc(x / ulp) * ulp;
      let worst = 0;
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let acc = 0;
          for (let p0 = 0; p0 < k; p0 += 16) {
            const terms = [acc];
            for (let p = p0; p < Math.min(p0 + 16, k); p++) terms.push(ra[transA ? p * m + i : i * k + p] * rb[transB ? j * k + p : p * n + j]);
            const big = Math.max(...terms.map(Math.abs));
            const ulp = big === 0 ? 0 : 2 ** (Math.floor(Math.log2(big)) - 23);
            const sum = ulp === 0 ? 0 : terms.reduce((s, t) => s + truncTo(t, ulp), 0);
            acc = sum === 0 ? 0 : truncTo(sum, 2 ** (Math.floor(Math.log2(Math.abs(sum))) - 23));
          }
          const e = Math.abs(acc - want[i * n + j]);
          assert.ok(e <= tol[i * n + j], `${m}x${n}x${k} (${i}, ${j}): truncating f32 summation is ${e} off, over the tolerance ${tol[i * n + j]}`);
          worst = Math.max(worst, e / tol[i * n + j]);
        }
      }
      assert.ok(worst < 0.25, `the truncating summation uses ${worst} of the tolerance, which should leave at least 4x room for tensor cores that sum worse than this model`);
      // Unrounded operands move the sums by far more than the tolerance somewhere.
      const f32 = ref.matmul(args);
      let over = 0;
      for (let i = 0; i < want.length; i++) over = Math.max(over, Math.abs(f32[i] - want[i]) / tol[i]);
      assert.ok(over > 4, `f32 operands stay within ${over} of the tolerance: it cannot tell them from f16 ones`);
    }
  });

  test('a scaled A (gradients) keeps values f16 alone would flush, and the tolerance scales with it', () => {
    const [m, n, k] = [9, 7, 40];
    const a = randn(m * k, 11).map((v) => v * 1e-9);
    const b = randn(k * n, 12);
    const args = { a, b, m, n, k };
    const [s] = gradScaleRef(a);
    assert.ok(roundArrayToF16(a).every((v) => v === 0), 'f16 flushes 1e-9 to zero');
    const scaled = roundScaledToF16(a, s);
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(scaled[i] - a[i]) <= Math.abs(a[i]) * 2 ** -11, `a[${i}]`);
    const want = matmulF16(args, s);
    const exact = ref.matmul(args);
    for (let i = 0; i < want.length; i++) assert.ok(Math.abs(want[i] - exact[i]) <= 1e-9 * 40 * 2 ** -10, `(${i}): ${want[i]} vs ${exact[i]}`);
    assert.ok(matmulF16(args).every((v) => v === 0));
    const tol = matmulF16Tolerance(args, s);
    const tolAt1 = matmulF16Tolerance({ ...args, a: a.map((v) => v * s) }, 1);
    for (let i = 0; i < tol.length; i++) assert.ok(Math.abs(tol[i] * s - tolAt1[i]) <= tolAt1[i] * 1e-6, `tolerance (${i})`);
    assert.throws(() => roundScaledToF16(a, 3), /not a power of two/);
  });

  test('the automatic tile follows the H200 measurements: 128x128 wherever the grid has 64 workgroups, 64x64 below', () => {
    const h200 = { gpu: { limits: { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024 } } } as unknown as Runtime;
    assert.equal(kt.chooseTensorTile(h200, 4096, 4864, 1, false, true), '128x128/w64x32/k32');
    assert.equal(kt.chooseTensorTile(h200, 4096, 896, 1, false, false), '128x128/w64x32/k32');
    assert.equal(kt.chooseTensorTile(h200, 4864, 896, 1, true, false), '128x128/w64x32/k32');
    assert.equal(kt.chooseTensorTile(h200, 1024, 1024, 1, false, true), '128x128/w64x32/k32');
    assert.equal(kt.chooseTensorTile(h200, 1024, 896, 1, false, true), '64x64/w32x32/k32');
    assert.equal(kt.chooseTensorTile(h200, 256, 256, 1, false, true), '64x64/w32x32/k32');
  });

  test('every tile configuration satisfies the shader and fits 48 KiB of workgroup memory', () => {
    for (const tile of TILES) {
      for (const [transA, transB] of TRANS) {
        const g = kt.tensorTileGeometry(tile, transA, transB);
        assert.ok(g.workgroupBytes <= 48 * 1024, `${tile}: ${g.workgroupBytes} bytes`);
        assert.equal(g.threads % 32, 0);
      }
    }
  });
});

describe('matmul/tensor.wgsl on Dawn\'s null backend (validation only, nothing runs)', () => {
  // Dawn's null backend offers every feature and runs no shader, but compiles each
  // pipeline through Tint (parsing, uniformity, override substitution) and validates
  // bind groups, so the WGSL of every variant is checked on machines without the GPU.
  // Its adapter keeps the default limits (16 KiB of workgroup memory) and a largest
  // subgroup of 128, so the variants here are shrunk tiles of 4 subgroups.
  const SHRUNK = [
    { SG_M: 2, SG_N: 2, FM: 1, FN: 1, BK: 32 },
    { SG_M: 1, SG_N: 4, FM: 4, FN: 1, BK: 16 },
    { SG_M: 4, SG_N: 1, FM: 1, FN: 4, BK: 16 },
    { SG_M: 2, SG_N: 2, FM: 2, FN: 2, BK: 16 },
  ];

  // Dawn tears a device down with its instance: instances stay referenced here.
  const instances: GPU[] = [];

  async function nullDevice(): Promise<GPUDevice | string> {
    if ((globalThis as { Deno?: unknown }).Deno) return 'Deno has no Dawn null backend';
    const dawn = (await import('webgpu')) as unknown as { create(flags: string[]): GPU };
    const instance = dawn.create(['backend=null', 'enable-dawn-features=allow_unsafe_apis']);
    instances.push(instance);
    const adapter = await instance.requestAdapter();
    const features = ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix'] as GPUFeatureName[];
    if (!adapter || !features.every((f) => adapter.features.has(f))) return 'no null adapter with f16 subgroup matrices';
    return adapter.requestDevice({ requiredFeatures: features });
  }

  test('every entry point and variant compiles; `main` needs a C binding of one 16x16 f32 block', { timeout: 300_000 }, async (t) => {
    const device = await nullDevice();
    if (typeof device === 'string') return t.skip(device);
    const module = device.createShaderModule({ code: shaderSource('matmul/tensor') });
    const info = await module.getCompilationInfo();
    assert.deepEqual(info.messages.filter((m) => m.type !== 'info').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`), []);
    for (const tile of SHRUNK) {
      for (const entryPoint of ['main', 'main_staged']) {
        // B_HALF (bit 7) only as it serves: weights (B transposed) in forward products (A
        // unscaled); SPLIT (bit 8) as the launcher takes it, the epilogue left to the sum.
        for (let flags = 0; flags < 512; flags++) {
          const bit = (i: number) => (flags >> i) & 1;
          if (bit(7) && (!bit(1) || bit(6))) continue;
          if (bit(8) && (bit(4) || bit(5) || bit(6))) continue;
          const constants = { ...tile, TRANS_A: bit(0), TRANS_B: bit(1), VEC_A: bit(2), VEC_B: bit(3), BIAS: bit(4), ACCUM: bit(5), SCALE_A: bit(6), B_HALF: bit(7), SPLIT: bit(8) };
          device.pushErrorScope('validation');
          device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint, constants } });
          const err: GPUError | null = await device.popErrorScope();
          assert.equal(err, null, `${entryPoint} ${JSON.stringify(constants)}: ${err?.message}`);
        }
      }
    }
    const buffer = (size: number, usage: number) => device.createBuffer({ size, usage });
    const bindC = async (entryPoint: string, cBytes: number) => {
      const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint, constants: SHRUNK[0] } });
      const storage = GPUBufferUsage.STORAGE;
      device.pushErrorScope('validation');
      device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [buffer(256, GPUBufferUsage.UNIFORM), buffer(256, storage), buffer(256, storage), buffer(256, storage), buffer(cBytes, storage), buffer(256, storage)]
          .map((b, binding) => ({ binding, resource: { buffer: b } })),
      });
      return device.popErrorScope();
    };
    assert.equal(await bindC('main', 1024), null);
    assert.match((await bindC('main', 256))?.message ?? 'accepted', /minimum binding size \(1024\)/);
    assert.equal(await bindC('main_staged', 256), null);
    device.destroy();
  });
});

let seed = 500;

interface Case extends Omit<kt.TensorMatmulArgs, 'a' | 'b' | 'out' | 'bias' | 'scaleA'> {
  bias?: boolean;
  /** Magnitude of A's elements (default 1); under `scaled`, A goes through its power-of-two scale. */
  aMagnitude?: number;
  scaled?: boolean;
  /** Initial output contents (accumulation, or a gap between output batches). */
  init?: boolean;
  /** B uploaded as f16 pairs (halfB), its values rounded to f16 on the host. */
  half?: boolean;
  label?: string;
}

// Operands stay out of f16's subnormal range (below 2^-14), whose flushing to zero
// Vulkan leaves to the driver.
function normalHalves(x: Float32Array): Float32Array {
  return x.map((v) => (Math.abs(v) < 2 ** -14 ? Math.sign(v || 1) * 2 ** -14 : v));
}

/** Runs the kernel on random data; compares with the f16-rounded reference, element by element within its tolerance. Returns the output. */
async function check(c: Case): Promise<Float32Array> {
  const { m, n, k, batch = 1 } = c;
  const strideA = c.strideA ?? m * k;
  const strideB = c.strideB ?? k * n;
  const strideC = c.strideC ?? m * n;
  const span = (offset = 0, stride: number, one: number) => (batch === 0 ? 0 : offset + (batch - 1) * stride + one);
  const A = c.aMagnitude === undefined ? normalHalves(randn(span(c.offsetA, strideA, m * k), seed++)) : randn(span(c.offsetA, strideA, m * k), seed++).map((v) => v * c.aMagnitude!);
  const [s, inv] = c.scaled ? gradScaleRef(A) : [1, 1];
  const B = normalHalves(randn(span(c.offsetB, strideB, k * n), seed++));
  // Packed halves, padded to whole words and vec4s: element 2j in word j's low 16 bits.
  const halves = () => {
    const h = new Uint16Array(Math.max(8, Math.ceil(B.length / 8) * 8));
    h.set(f32ToF16(B));
    return tensor(new Uint32Array(h.buffer), [h.length / 2], 'u32');
  };
  const bias = c.bias ? randn(n, seed++) : undefined;
  const C0 = c.init ? randn(span(c.offsetC, strideC, m * n), seed++) : undefined;
  const label = c.label ?? `${m}x${n}x${k} batch ${batch} trans ${c.transA ? 'T' : 'N'}${c.transB ? 'T' : 'N'} tile ${c.tile ?? 'auto'}${c.bias ? ' bias' : ''}${c.accumulate ? ' accumulate' : ''}`;
  return scopeAsync(async () => {
    const out = C0 ? tensor(C0) : zeros([Math.max(span(c.offsetC, strideC, m * n), 1)]);
    const scaleA = c.scaled ? tensor(Float32Array.of(s, inv)).buffer : undefined;
    const { half, ...shape } = c;
    kt.matmulTensor(rt, { ...shape, a: tensor(A).buffer, b: (half ? halves() : tensor(B)).buffer, halfB: half, out: out.buffer, bias: bias && tensor(bias).buffer, scaleA });
    const got = await read(out);
    const args = { ...c, a: A, b: B, bias, c: C0 };
    const want = matmulF16(args, s);
    const tol = matmulF16Tolerance(args, s);
    for (let i = 0; i < want.length; i++) {
      const err = Math.abs(got[i] - want[i]);
      if (!(err <= tol[i])) {
        const f32 = ref.matmul(args)[i];
        assert.fail(`${label}: element ${i} is ${got[i]}, the f16-operand product is ${want[i]} (tolerance ${tol[i]}; with f32 operands ${f32})`);
      }
    }
    return got.subarray(0, want.length);
  });
}

describe('routing forward products to tensor cores', () => {
  test('only large forward products without an epilogue activation, on devices that have f16 subgroup matrices', () => {
    const caps = { f16: true, subgroups: true, subgroupMatrix: true, subgroupMatrixF16F32: true, subgroupMatrixConfigs: [], subgroupMinSize: 32, subgroupMaxSize: 32 };
    const h200 = { caps, gpu: { description: 'H200' }, policy: kernelPolicy() } as unknown as Runtime;
    const without = { caps: { ...caps, subgroupMatrix: false }, gpu: { description: 'no tensor cores' }, policy: kernelPolicy() } as unknown as Runtime;
    const big = { a: null, b: null, out: null, m: 4096, n: 4864, k: 896, transB: true } as unknown as Parameters<typeof usesTensorCores>[1];
    assert.equal(usesTensorCores(h200, big), true);
    assert.equal(usesTensorCores(without, big), false);
    assert.equal(usesTensorCores(h200, { ...big, m: 32 }), false, 'decode rows take the f32 skinny path');
    const lmHead = { ...big, m: 32, n: 151936 };
    assert.equal(usesTensorCores(h200, lmHead), true, 'an LM head of 32 decode rows is faster on tensor cores');
    assert.equal(usesTensorCores(h200, { ...lmHead, m: 16 }), false, 'fewer rows stay on the skinny path');
    assert.equal(usesTensorCores(h200, { ...big, n: 64, k: 64 }), false, 'too small to gain');
    assert.equal(usesTensorCores(h200, { ...big, act: 'silu' }), false);
    assert.equal(usesTensorCores(h200, { ...big, tile: '128x128/k8' }), false, 'a forced f32 tile stays');
    h200.policy.tensorCores.enabled = false;
    assert.equal(usesTensorCores(h200, big), false);
  });

  test('a sampling step keeps a wide LM head on tensor cores where the plain forward would take them', () => {
    const caps = { f16: true, subgroups: true, subgroupMatrix: true, subgroupMatrixF16F32: true, subgroupMatrixConfigs: [], subgroupMinSize: 32, subgroupMaxSize: 32, compatibility: false };
    const limits = { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024, maxStorageBuffersPerShaderStage: 10 };
    const rt = { caps, gpu: { description: 'H200', limits }, policy: kernelPolicy() } as unknown as Runtime;
    const model = { lmHead: () => ({ storage: { rt } }), config: { hidden: 896, vocabSize: 151936 } } as unknown as Parameters<typeof headOnSkinny>[0];
    assert.equal(headOnSkinny(model, 8), true, 'a few rows read the head on the skinny kernel');
    assert.equal(headOnSkinny(model, 32), false, 'at wideMinRows rows the head is a tensor-core product');
    rt.policy.tensorCores.enabled = false;
    assert.equal(headOnSkinny(model, 32), true, 'without tensor cores 32 rows stay skinny');
  });

  test('--tensor-cores auto, forward and off set the runtime\'s policy; anything else is refused', () => {
    const tensorCores = (mode?: string) => {
      const { enabled, gradients } = kernelPolicy(gpuOptions({ 'tensor-cores': mode }).policy).tensorCores;
      return [enabled, gradients];
    };
    assert.deepEqual(tensorCores('forward'), [true, false]);
    assert.deepEqual(tensorCores('off'), [false, false]);
    assert.deepEqual(tensorCores(), [true, true]);
    assert.throws(() => gpuOptions({ 'tensor-cores': 'all' }), /--tensor-cores must be auto, forward or off, got "all"/);
  });

  test('gradient products take tensor cores only when the policy routes gradients, and then scaled', async () => {
    const caps = { f16: true, subgroups: true, subgroupMatrix: true, subgroupMatrixF16F32: true, subgroupMatrixConfigs: [], subgroupMinSize: 32, subgroupMaxSize: 32 };
    const h200 = { caps, gpu: { description: 'H200' }, policy: kernelPolicy() } as unknown as Runtime;
    const dw = { a: null, b: null, out: null, m: 4864, n: 896, k: 4096, transA: true } as unknown as Parameters<typeof usesTensorCores>[1];
    h200.policy.tensorCores.gradients = false;
    assert.equal(gradientUsesTensorCores(h200, dw), false, 'gradients stay f32 under --tensor-cores forward');
    h200.policy.tensorCores.gradients = true;
    assert.equal(gradientUsesTensorCores(h200, dw), true);
    assert.equal(gradientUsesTensorCores(h200, { ...dw, m: 16, n: 16 }), false, 'too small to gain');
    h200.policy.tensorCores.enabled = false;
    assert.equal(gradientUsesTensorCores(h200, dw), false, '--tensor-cores off turns both off');
    // Where the device has no tensor cores the products run on the f32 kernels, exactly.
    const [m, n, k] = [33, 21, 50];
    const g = randn(m * n, 21);
    const w = randn(n * k, 22);
    const x = randn(m * k, 23);
    const local = await gpu();
    if (kt.tensorMatmulAvailable(local)) return;
    await withPolicy(local, { tensorCores: { minMacs: 0 } }, () => scopeAsync(async () => {
      const gT = tensor(g);
      const dx = zeros([m * k]);
      const dwOut = zeros([n * k]);
      gradientMatmuls(local, gT.buffer, m * n, [
        { a: gT.buffer, b: tensor(w).buffer, out: dx.buffer, m, n: k, k: n },
        { a: gT.buffer, b: tensor(x).buffer, out: dwOut.buffer, m: n, n: k, k: m, transA: true },
      ]);
      assertClose(await read(dx), ref.matmul({ a: g, b: w, m, n: k, k: n }), { atol: 1e-5, rtol: 1e-5, label: 'dx' });
      assertClose(await read(dwOut), ref.matmul({ a: g, b: x, m: n, n: k, k: m, transA: true }), { atol: 1e-5, rtol: 1e-5, label: 'dw' });
      assert.throws(() => gradientMatmuls(local, gT.buffer, m * n, [{ a: dx.buffer, b: gT.buffer, out: dwOut.buffer, m: 1, n: 1, k: 1 }]), /gradient as A/);
    }));
  });

  test('linear under --tensor-cores forward: the forward runs on tensor cores (f16-rounded operands), the gradients on the f32 kernels', onDevice, async () => {
    await withPolicy(rt, { tensorCores: { minMacs: 0, gradients: false } }, async () => {
      const [rows, inF, outF] = [130, 200, 70];
      const x = randn(rows * inF, 901);
      const w = randn(outF * inF, 902);
      const bias = randn(outF, 903);
      const g = randn(rows * outF, 904);
      await scopeAsync(async () => {
        const xt = requireGrad(tensor(x, [rows, inF]));
        const wt = requireGrad(tensor(w, [outF, inF]));
        const y = linear(xt, wt, tensor(bias, [outF]));
        const yWant = matmulF16({ a: x, b: w, bias, m: rows, n: outF, k: inF, transB: true });
        const got = await read(y);
        const tol = matmulF16Tolerance({ a: x, b: w, m: rows, n: outF, k: inF, transB: true });
        for (let i = 0; i < got.length; i++) assert.ok(Math.abs(got[i] - yWant[i]) <= tol[i] + 1e-6, `y[${i}] = ${got[i]}, f16-rounded reference ${yWant[i]}`);
        backward(sum(mul(y, tensor(g, [rows, outF]))));
        assertClose(await read(xt.grad!), ref.matmul({ a: g, b: w, m: rows, n: inF, k: outF }), { atol: 1e-4, rtol: 1e-4, label: 'dx in f32' });
        assertClose(await read(wt.grad!), ref.matmul({ a: g, b: x, m: outF, n: inF, k: rows, transA: true }), { atol: 1e-4, rtol: 1e-4, label: 'dw in f32' });
      });
      await scopeAsync(async () => {
        const out = zeros([rows * outF]);
        forwardMatmul(rt, { a: tensor(x).buffer, b: tensor(w).buffer, out: out.buffer, m: rows, n: outF, k: inF, transB: true, act: 'silu' });
        assertClose(await read(out), ref.matmul({ a: x, b: w, m: rows, n: outF, k: inF, transB: true, act: 'silu' }), { atol: 1e-4, rtol: 1e-4, label: 'an epilogue activation stays f32' });
      });
    });
  });
});

describe('tensor-core matmul kernel', () => {
  test('odd and aligned shapes, every transpose combination, every tile', onDevice, async () => {
    for (const tile of TILES) {
      for (const [transA, transB] of TRANS) {
        for (const [m, n, k] of [[1, 1, 1], [17, 33, 45], [64, 64, 64], [130, 70, 200]]) await check({ m, n, k, transA, transB, tile });
      }
    }
  });

  test('the automatic tile, whole tiles stored directly, many tiles and K slices', onDevice, async () => {
    for (const [transA, transB] of TRANS) {
      await check({ m: 130, n: 70, k: 200, transA, transB });
      // n a multiple of 4: whole tiles store straight from the accumulators, edge tiles through scratch.
      await check({ m: 128, n: 128, k: 64, transA, transB, tile: '64x64/w32x32/k32' });
      await check({ m: 150, n: 132, k: 33, transA, transB, tile: '128x128/w64x32/k32' });
      await check({ m: 256, n: 256, k: 40, transA, transB, tile: '128x256/w64x64/k16' });
      // Every tile and K slice inside the operands (no bounds checks), several slices.
      await check({ m: 256, n: 256, k: 96, transA, transB, tile: '128x256/w64x64/k16' });
      await check({ m: 256, n: 128, k: 96, transA, transB, tile: '128x128/w64x32/k32' });
    }
    // More tile rows than one group of GROUP_M, many K slices.
    await check({ m: 600, n: 72, k: 70, tile: '64x64/w32x32/k32' });
    await check({ m: 1100, n: 260, k: 300, transB: true, tile: '128x128/w64x32/k32' });
    await check({ m: 4, n: 4, k: 0, label: 'k = 0 gives zeros' });
    await check({ m: 5, n: 6, k: 0, bias: true, label: 'k = 0 with a bias gives the bias' });
  });

  test('bias and accumulation, on the direct and the scratch epilogue', onDevice, async () => {
    for (const [transA, transB] of TRANS) {
      for (const tile of ['64x64/w32x32/k32', '128x128/w64x32/k32'] as const) {
        await check({ m: 19, n: 13, k: 11, transA, transB, tile, bias: true });
        await check({ m: 19, n: 13, k: 11, transA, transB, tile, init: true, accumulate: true });
        await check({ m: 19, n: 13, k: 11, transA, transB, tile, bias: true, init: true, accumulate: true });
        await check({ m: 128, n: 128, k: 48, transA, transB, tile, bias: true });
        await check({ m: 128, n: 128, k: 48, transA, transB, tile, init: true, accumulate: true });
        await check({ m: 128, n: 128, k: 48, transA, transB, tile, bias: true, init: true, accumulate: true });
      }
    }
  });

  test('batched, with per-batch operands, broadcast (stride 0) operands, offsets and gaps', onDevice, async () => {
    for (const [transA, transB] of TRANS) {
      await check({ m: 9, n: 6, k: 5, batch: 3, transA, transB });
      await check({ m: 9, n: 6, k: 5, batch: 3, transA, transB, strideA: 0 });
      await check({ m: 9, n: 6, k: 5, batch: 3, transA, transB, strideB: 0 });
      await check({ m: 70, n: 68, k: 20, batch: 3, transA, transB, strideA: 0, tile: '64x64/w32x32/k32' });
      await check({ m: 64, n: 64, k: 32, batch: 2, transA, transB, tile: '64x64/w32x32/k32', init: true, accumulate: true });
      await check({ m: 9, n: 6, k: 5, batch: 2, transA, transB, offsetA: 3, offsetB: 7, offsetC: 5, label: `unaligned offsets ${transA} ${transB}` });
      await check({ m: 64, n: 64, k: 36, batch: 2, transA, transB, offsetA: 8, offsetB: 4, offsetC: 12, strideB: 0, tile: '64x64/w32x32/k32', label: `aligned offsets ${transA} ${transB}` });
    }
    await check({ m: 7, n: 3, k: 2, batch: 2, strideC: 30, init: true, label: 'output batches with a gap keep the gap' });
    await check({ m: 64, n: 64, k: 16, batch: 2, strideC: 64 * 64 + 4, init: true, tile: '64x64/w32x32/k32', label: 'aligned gap, direct stores' });
  });

  test('a scaled A: gradients of 1e-9 keep their precision, with bias, accumulation and every transpose', onDevice, async () => {
    for (const [transA, transB] of TRANS) {
      for (const aMagnitude of [1e-9, 1e-3, 1e4]) await check({ m: 130, n: 70, k: 200, transA, transB, aMagnitude, scaled: true });
      await check({ m: 19, n: 13, k: 11, transA, transB, aMagnitude: 1e-7, scaled: true, bias: true, init: true, accumulate: true });
      await check({ m: 128, n: 128, k: 48, transA, transB, aMagnitude: 1e-7, scaled: true, tile: '64x64/w32x32/k32' });
    }
  });

  test('linear under --tensor-cores auto: dX and dW on tensor cores from the scaled gradient', onDevice, async () => {
    await withPolicy(rt, { tensorCores: { minMacs: 0, gradients: true } }, async () => {
      const [rows, inF, outF] = [130, 200, 70];
      const x = randn(rows * inF, 911);
      const w = randn(outF * inF, 912);
      const g = randn(rows * outF, 913).map((v) => v * 1e-8);
      const [s] = gradScaleRef(g);
      await scopeAsync(async () => {
        const xt = requireGrad(tensor(x, [rows, inF]));
        const wt = requireGrad(tensor(w, [outF, inF]));
        backward(sum(mul(linear(xt, wt), tensor(g, [rows, outF]))));
        const within = (got: Float32Array, args: Parameters<typeof matmulF16>[0], label: string) => {
          const want = matmulF16(args, s);
          const tol = matmulF16Tolerance(args, s);
          for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= tol[i], `${label}[${i}] = ${got[i]}, scaled f16 reference ${want[i]} (tolerance ${tol[i]})`);
        };
        within(await read(xt.grad!), { a: g, b: w, m: rows, n: inF, k: outF }, 'dx');
        within(await read(wt.grad!), { a: g, b: x, m: outF, n: inF, k: rows, transA: true }, 'dw');
      });
    });
  });

  test('B as f16 pairs: the product of the same values as an f32 B, aligned and not, with bias and accumulation', onDevice, async () => {
    for (const transA of [false, true]) {
      for (const [m, n, k] of [[128, 1152, 896], [130, 70, 200], [17, 33, 45], [19, 13, 11], [1, 1, 1]]) {
        await check({ m, n, k, transA, transB: true, half: true });
        await check({ m, n, k, transA, transB: true, half: true, bias: true, init: true, accumulate: true });
      }
      await check({ m: 64, n: 64, k: 36, batch: 2, transA, transB: true, offsetA: 8, offsetB: 4, offsetC: 12, half: true, tile: '64x64/w32x32/k32', label: `half B, aligned offsets ${transA}` });
      await check({ m: 9, n: 6, k: 5, batch: 2, transA, transB: true, offsetA: 3, offsetB: 7, offsetC: 5, half: true, label: `half B, unaligned offsets ${transA}` });
    }
  });

  test('k cut into runs: the same product as k whole, with bias and accumulation, f16 B, aligned and not', onDevice, async () => {
    for (const transA of [false, true]) {
      for (const [m, n, k, runs] of [[128, 896, 4864, 9], [128, 1152, 896, 3], [130, 68, 200, 4], [17, 36, 45, 2], [64, 64, 64, 8]]) {
        await check({ m, n, k, transA, transB: true, half: true, runs, label: `${m}x${n}x${k} in ${runs} runs, f16 B, transA ${transA}` });
        await check({ m, n, k, transA, transB: true, half: true, runs, bias: true, init: true, accumulate: true, label: `${m}x${n}x${k} in ${runs} runs, bias, accumulated` });
        await check({ m, n, k, transA, transB: false, runs, bias: true, label: `${m}x${n}x${k} in ${runs} runs, f32 B` });
      }
    }
    await check({ m: 16, n: 8, k: 40, runs: 64, label: 'more runs than K slices: one run a slice' });
    await check({ m: 16, n: 8, k: 64, runs: 2, offsetA: 4, offsetB: 8, offsetC: 4, init: true, accumulate: true, label: 'runs with operand and output offsets' });
  });

  test('a decode product cuts k where its tiles leave the GPU idle, and only there', { skip: rt ? false : 'no GPU' }, async () => {
    // Qwen2.5-0.5B at 128 rows: the down projection (28 tiles of 64x64) and the 896-wide
    // ones split; gate and up (152 tiles) and the LM head do not.
    assert.equal(kt.decodeRuns(rt, 128, 896, 4864), 9);
    assert.equal(kt.decodeRuns(rt, 128, 896, 896), 3);
    assert.equal(kt.decodeRuns(rt, 128, 4864, 896), 1);
    assert.equal(kt.decodeRuns(rt, 128, 151936, 896), 1);
    assert.equal(kt.decodeRuns(rt, 128, 898, 4864), 1, 'n not a multiple of 4');
    await withPolicy(rt, { decode: { splitWorkgroups: 0 } }, async () => assert.equal(kt.decodeRuns(rt, 128, 896, 4864), 1));
  });

  test('a grid spread over several dispatches gives the same bits as one dispatch', onDevice, async () => {
    const common = { m: 300, n: 260, k: 70, transB: true, tile: '64x64/w32x32/k32' as const };
    seed = 900;
    const whole = await check(common);
    for (const tilesPerDispatch of [1, 7, 16]) {
      seed = 900;
      const split = await check({ ...common, tilesPerDispatch, label: `${tilesPerDispatch} tiles per dispatch` });
      assert.deepEqual(split, whole);
    }
  });

  test('launcher errors name the problem', onDevice, async () => {
    await scopeAsync(async () => {
      const t = zeros([64]);
      const o = zeros([64]);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 100, n: 1, k: 1 }), /matmulTensor: A needs 400 bytes/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: t.buffer, m: 1, n: 1, k: 1 }), /output buffer is also an input/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 2, n: 2, k: 1, batch: 2, strideC: 1 }), /overlap/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 1.5, n: 1, k: 1 }), /m = 1.5 is not a count/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 1, n: 1, k: 1, tilesPerDispatch: 0 }), /tilesPerDispatch/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 1, n: 1, k: 1, tile: 'nope' as kt.TensorTile }), /unknown tile "nope"/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 2, n: 4, k: 2, batch: 2, strideA: 0, strideB: 0, runs: 2 }), /runs of k need one batch/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 2, n: 3, k: 2, runs: 2 }), /n a multiple of 4/);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: o.buffer, m: 2, n: 4, k: 2, runs: 0 }), /runs = 0/);
    });
  });

  test('a device without f16 subgroup matrices is refused, naming what it lacks', { skip: missing ? false : 'this device has f16 subgroup matrices' }, async () => {
    assert.equal(kt.tensorMatmulAvailable(rt), false);
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => kt.matmulTensor(rt, { a: t.buffer, b: t.buffer, out: zeros([64]).buffer, m: 1, n: 1, k: 1 }),
        (e: Error) => e.message.startsWith('matmulTensor: the tensor-core matmul needs') && e.message.includes(missing!.split(';')[0]));
    });
    if (!rt.caps.f16) assert.match(missing!, /shader-f16/);
    if (!rt.caps.subgroupMatrix) assert.match(missing!, /chromium-experimental-subgroup-matrix/);
  });

  test('the run log notes a hardware adapter without tensor cores, naming the NVIDIA toggles; not the software GPU', () => {
    const caps = { f16: false, subgroups: true, subgroupMatrix: false, subgroupMatrixConfigs: [], subgroupMatrixF16F32: false, subgroupMinSize: 32, subgroupMaxSize: 32 };
    const fake = (compatibility: boolean, extra: object = {}) => ({ caps: { ...caps, compatibility, ...extra }, gpu: { description: 'nvidia h200' }, policy: kernelPolicy() }) as unknown as Runtime;
    assert.match(tensorCoreNote(fake(false))!, /^tensor cores: not used; .*shader-f16.*allow_unsafe_apis,vulkan_enable_f16_on_nvidia/);
    assert.equal(tensorCoreNote(fake(true)), null);
    assert.equal(tensorCoreNote(fake(false, { f16: true, subgroupMatrix: true, subgroupMatrixF16F32: true })), null);
    const off = fake(false);
    off.policy.tensorCores.enabled = false;
    assert.equal(tensorCoreNote(off), null);
  });
});
