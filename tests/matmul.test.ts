import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { MatmulLayoutName } from '../src/gpu/kernel_policy.ts';
import type { MatmulArgs } from '../src/kernels/matmul/args.ts';
import { matmul as matmulKernel } from '../src/kernels/matmul/matmul.ts';
import { autoTile, chooseTile } from '../src/kernels/matmul/select.ts';
import { skinnyFits } from '../src/kernels/matmul/skinny.ts';
import { MATMUL_TILES, PANEL_TILE, SKINNY_TILE, type MatmulTile } from '../src/kernels/matmul/tiles.ts';
import * as ref from '../src/reference/matmul.ts';
import { randn } from '../src/util/random.ts';
import { scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { linear, matmul } from '../src/tensor/ops/matmul.ts';
import { assertClose, gpu, gradCheck, read, withPolicy } from './support/gpu.ts';

// Each kernel variant compiles once on the software GPU; that dominates the run time.
const slow = { timeout: 300_000 };

const TRANS: [boolean, boolean][] = [[false, false], [true, false], [false, true], [true, true]];

let seed = 100;

interface Case extends Omit<MatmulArgs, 'a' | 'b' | 'out' | 'bias'> {
  bias?: boolean;
  /** Initial output contents (accumulation). */
  init?: boolean;
  label?: string;
}

/** Runs the kernel on random data and compares with the CPU reference. */
async function check(c: Case): Promise<void> {
  const rt = await gpu();
  const { m, n, k, batch = 1 } = c;
  const strideA = c.strideA ?? m * k;
  const strideB = c.strideB ?? k * n;
  const strideC = c.strideC ?? m * n;
  const span = (offset = 0, stride: number, one: number) => (batch === 0 ? 0 : offset + (batch - 1) * stride + one);
  const A = randn(span(c.offsetA, strideA, m * k), seed++);
  const B = randn(span(c.offsetB, strideB, k * n), seed++);
  const bias = c.bias ? randn(n, seed++) : undefined;
  const C0 = c.init ? randn(span(c.offsetC, strideC, m * n), seed++) : undefined;
  await scopeAsync(async () => {
    const out = C0 ? tensor(C0) : zeros([Math.max(span(c.offsetC, strideC, m * n), 1)]);
    matmulKernel(rt, {
      ...c, a: tensor(A).buffer, b: tensor(B).buffer, out: out.buffer, bias: bias && tensor(bias).buffer,
    });
    const got = await read(out);
    const want = ref.matmul({ ...c, a: A, b: B, bias, c: C0, act: c.act });
    const label = c.label ?? `${m}x${n}x${k} batch ${batch} trans ${c.transA ? 'T' : 'N'}${c.transB ? 'T' : 'N'} tile ${c.tile ?? 'auto'}`;
    assertClose(got.subarray(0, want.length), want, { atol: 1e-4, rtol: 1e-4, label });
  });
}

describe('matmul kernel', () => {
  test('all transpose combinations match the reference on odd and aligned shapes, every tile', slow, async () => {
    const shapes = [[1, 1, 1], [3, 5, 7], [5, 7, 8], [67, 129, 33], [68, 132, 36]];
    for (const tile of [...Object.keys(MATMUL_TILES), PANEL_TILE] as MatmulTile[]) {
      for (const [transA, transB] of TRANS) {
        for (const [m, n, k] of shapes) await check({ m, n, k, transA, transB, tile });
      }
    }
  });

  test('each layout on the tiled entry point the policy does not send it to (plain outputs; the rest always take main)', slow, async () => {
    const rt = await gpu();
    const all: MatmulLayoutName[] = ['nn', 'nt', 'tn', 'tt'];
    await withPolicy(rt, { matmul: { originLayouts: all.filter((l) => !rt.policy.matmul.originLayouts.includes(l)) } }, async () => {
      for (const [transA, transB] of TRANS) {
        await check({ m: 67, n: 300, k: 37, transA, transB, tile: '128x256/k16' });
        await check({ m: 9, n: 6, k: 5, batch: 2, transA, transB, offsetA: 3, offsetB: 7, offsetC: 5, bias: true, act: 'silu', init: true, accumulate: true, tile: '64x64/k8' });
      }
    });
  });

  test('split-K on every layout, tile and epilogue, runs that leave a short last one or fewer than asked', slow, async () => {
    for (const [transA, transB] of TRANS) await check({ m: 67, n: 132, k: 150, transA, transB, tile: '64x64/k8', splitK: 3 });
    await check({ m: 67, n: 300, k: 100, tile: '128x256/k16', splitK: 2 });
    await check({ m: 9, n: 8, k: 70, transB: true, bias: true, act: 'silu', init: true, accumulate: true, offsetC: 5, tile: '128x128/k16', splitK: 4 });
    // Operands bound at their offsets (multiples of the software GPU's 256-byte alignment).
    await check({ m: 20, n: 24, k: 40, transA: true, offsetA: 64, offsetB: 128, tile: '64x64/k8', splitK: 2 });
    // 8 runs of 20 k round up to whole 16-k slices: 2 runs. With k = 0 nothing is cut.
    await check({ m: 12, n: 16, k: 20, tile: '64x64/k8', splitK: 8 });
    await check({ m: 4, n: 8, k: 0, bias: true, tile: '64x64/k8', splitK: 3 });
  });

  test('split-K refuses what it cannot cut, with the reason', async () => {
    const rt = await gpu();
    await scopeAsync(async () => {
      const buf = zeros([64 * 64]).buffer;
      const out = zeros([64 * 64]).buffer;
      const base = { a: buf, b: buf, out, m: 8, n: 8, k: 16 };
      assert.throws(() => matmulKernel(rt, { ...base, splitK: 0 }), /splitK = 0 is not a count of runs/);
      assert.throws(() => matmulKernel(rt, { ...base, splitK: 1.5 }), /splitK = 1.5/);
      assert.throws(() => matmulKernel(rt, { ...base, splitK: 2, tile: 'panels/k128' }), /split-K runs on the workgroup tiles, not panels\/k128/);
      assert.throws(() => matmulKernel(rt, { ...base, splitK: 2, batch: 2, tile: '64x64/k8' }), /split-K needs one batch/);
      assert.throws(() => matmulKernel(rt, { ...base, n: 6, splitK: 2, tile: '64x64/k8' }), /n a multiple of 4/);
      // 64 runs of 16 k: partial sums 64 times C's size, past the binding limit.
      const [m, k] = [512, 1024];
      const n = Math.ceil(rt.gpu.limits.maxStorageBufferBindingSize / (4 * 64 * m) / 4) * 4 + 4;
      const big = { a: zeros([m * k]).buffer, b: zeros([k * n]).buffer, out: zeros([m * n]).buffer, m, n, k };
      assert.throws(() => matmulKernel(rt, { ...big, splitK: 64, tile: '64x64/k8' }), /64 split-K runs of a 512x\d+ output need \d+ bytes of partial sums, over the \d+-byte binding limit; ask for fewer runs/);
    });
  });

  test('many K slices, partial edge tiles and more tile rows than one group', slow, async () => {
    await check({ m: 600, n: 72, k: 70, tile: '64x64/k8' });
    await check({ m: 600, n: 72, k: 70, tile: '64x64/k8', transA: true, transB: true });
    await check({ m: 300, n: 260, k: 50, tile: '128x128/k16' });
    await check({ m: 300, n: 260, k: 50, tile: '128x128/k8', transA: true });
    await check({ m: 1100, n: 9, k: 3, tile: '128x128/k16', transB: true });
    await check({ m: 300, n: 520, k: 50, tile: '128x256/k16' });
    await check({ m: 300, n: 521, k: 50, tile: '128x256/k16', transA: true, transB: true });
    await check({ m: 4, n: 4, k: 0, label: 'k = 0 gives zeros' });
    // Uniform panels: several row and column panels and K chunks, partial last ones.
    await check({ m: 300, n: 260, k: 130, tile: 'panels/k128' });
    await check({ m: 300, n: 261, k: 130, tile: 'panels/k128', transA: true, transB: true });
    await check({ m: 600, n: 520, k: 70, tile: PANEL_TILE, panelK: 32, transB: true });
  });

  test('outputs of whole tiles (no bounds checks), whole and cut along k, every layout', slow, async () => {
    for (const [transA, transB] of TRANS) await check({ m: 256, n: 128, k: 48, transA, transB, tile: '128x128/k16' });
    await check({ m: 128, n: 256, k: 16, tile: '128x256/k16', label: 'main_origins, one slice of k' });
    await check({ m: 128, n: 256, k: 32, transB: true, bias: true, act: 'relu', tile: '128x256/k16' });
    await check({ m: 128, n: 128, k: 48, batch: 2, offsetA: 4, offsetB: 8, offsetC: 12, tile: '128x128/k16' });
    await check({ m: 64, n: 128, k: 24, transA: true, tile: '64x64/k8' });
    await check({ m: 128, n: 128, k: 96, tile: '128x128/k16', splitK: 3 });
    await check({ m: 128, n: 128, k: 80, transA: true, accumulate: true, init: true, tile: '128x128/k16', splitK: 2 });
  });

  test('stream-K: streamed tiles summed from partial tiles, beside whole ones, every layout and epilogue', slow, async () => {
    // 3 x 2 tiles of 64x64 with 26 slices of 8 (the last one short): 17 shares of 10
    // slices cut every tile in two or three, one share across a tile boundary.
    for (const [transA, transB] of TRANS) await check({ m: 150, n: 100, k: 203, transA, transB, tile: '64x64/k8', streamK: { tiles: 6, shares: 17 } });
    await check({ m: 150, n: 100, k: 203, bias: true, act: 'silu', tile: '64x64/k8', streamK: { tiles: 4, shares: 9 }, label: 'four tiles streamed, two whole, bias and silu' });
    await check({ m: 150, n: 100, k: 64, transB: true, init: true, accumulate: true, tile: '64x64/k8', streamK: { tiles: 1, shares: 3 }, label: 'one tile streamed, accumulating' });
    await check({ m: 150, n: 100, k: 64, offsetC: 8, tile: '64x64/k8', streamK: { tiles: 6, shares: 7 }, label: 'output at an offset' });
    await check({ m: 256, n: 128, k: 80, transB: true, tile: '128x128/k16', streamK: { tiles: 2, shares: 3 }, label: 'whole tiles, shares of 4 of 5 slices' });
    await check({ m: 128, n: 256, k: 48, tile: '128x256/k16', streamK: { tiles: 1, shares: 2 }, label: 'the wide tile' });
    await check({ m: 256, n: 256, k: 48, tile: '128x256/k16', streamK: { tiles: 1, shares: 2 }, label: 'the wide tile, its whole tile on main_origins' });
    await check({ m: 128, n: 128, k: 48, transA: true, tile: '128x128/t16', streamK: { tiles: 1, shares: 3 }, label: 'the 8x16 block on a 128x128 tile' });
  });

  test('stream-K refuses plans it cannot run, with what is wrong', async () => {
    const rt = await gpu();
    const [a, b, out] = [zeros([64 * 64]), zeros([64 * 64]), zeros([64 * 64])];
    const args = { a: a.buffer, b: b.buffer, out: out.buffer, m: 64, n: 64, k: 64, tile: '64x64/k8' as const };
    assert.throws(() => matmulKernel(rt, { ...args, streamK: { tiles: 1, shares: 1 } }), /more shares than tiles/);
    assert.throws(() => matmulKernel(rt, { ...args, streamK: { tiles: 2, shares: 3 } }), /at most all/);
    assert.throws(() => matmulKernel(rt, { ...args, streamK: { tiles: 1, shares: 2 }, splitK: 2 }), /pass one/);
    assert.throws(() => matmulKernel(rt, { ...args, n: 62, streamK: { tiles: 1, shares: 2 } }), /n a multiple of 4/);
    assert.throws(() => matmulKernel(rt, { ...args, tile: PANEL_TILE, panelK: 32, streamK: { tiles: 1, shares: 2 } }), /stream-K runs on the workgroup tiles, not panels\/k128/);
  });

  test('batched, with per-batch operands, a broadcast (stride 0) operand and offsets', slow, async () => {
    for (const [transA, transB] of TRANS) {
      await check({ m: 9, n: 6, k: 5, batch: 3, transA, transB });
      await check({ m: 9, n: 6, k: 5, batch: 3, transA, transB, strideA: 0 });
      await check({ m: 9, n: 6, k: 5, batch: 3, transA, transB, strideB: 0 });
      await check({ m: 8, n: 12, k: 4, batch: 2, transA, transB, strideB: 0 });
      await check({ m: 70, n: 68, k: 20, batch: 2, transA, transB, strideA: 0, tile: '64x64/k8' });
      await check({ m: 70, n: 68, k: 20, batch: 3, transA, transB, tile: '64x64/k8' });
    }
    await check({ m: 7, n: 3, k: 2, batch: 1 });
    await check({ m: 7, n: 3, k: 2, batch: 2, strideC: 30, label: 'output batches with a gap' });
    for (const [transA, transB] of TRANS) {
      await check({ m: 9, n: 6, k: 5, batch: 2, transA, transB, offsetA: 3, offsetB: 7, offsetC: 5, label: `unaligned offsets ${transA} ${transB}` });
      await check({ m: 8, n: 12, k: 4, batch: 2, transA, transB, offsetA: 8, offsetB: 4, offsetC: 12, strideB: 0, label: `aligned offsets ${transA} ${transB}` });
      // One batch: operands at 256-byte offsets are bound there (the kernel without base arithmetic), others not.
      await check({ m: 8, n: 12, k: 4, transA, transB, offsetA: 64, offsetB: 128, offsetC: 64, tile: '64x64/k8', label: `bound offsets ${transA} ${transB}` });
      await check({ m: 8, n: 12, k: 4, transA, transB, offsetA: 64, offsetB: 4, offsetC: 3, tile: '64x64/k8', label: `bound and kept offsets ${transA} ${transB}` });
    }
    for (const [transA, transB] of TRANS) {
      await check({ m: 9, n: 6, k: 37, batch: 3, transA, transB, strideA: 0, tile: PANEL_TILE, panelK: 32 });
      await check({ m: 9, n: 6, k: 37, batch: 3, transA, transB, strideB: 0, tile: PANEL_TILE, panelK: 32 });
      await check({ m: 9, n: 6, k: 5, batch: 2, transA, transB, offsetA: 3, offsetB: 7, offsetC: 5, tile: PANEL_TILE, panelK: 32 });
      await check({ m: 8, n: 12, k: 36, batch: 2, transA, transB, offsetA: 8, offsetB: 4, offsetC: 12, strideC: 100, tile: PANEL_TILE, panelK: 32 });
    }
  });

  test('bias and activation epilogues, and accumulation into the output', slow, async () => {
    for (const act of ['none', 'silu', 'gelu', 'relu'] as const) {
      await check({ m: 19, n: 13, k: 11, act, bias: true });
      await check({ m: 19, n: 16, k: 12, act, bias: true, transB: true });
      await check({ m: 10, n: 13, k: 11, act, init: true, accumulate: true });
    }
    await check({ m: 19, n: 16, k: 12, batch: 2, bias: true, act: 'gelu', init: true, accumulate: true, transA: true });
    // The 8x16 register blocks' third and fourth column groups, element and vec4 stores.
    await check({ m: 19, n: 301, k: 20, bias: true, act: 'silu', init: true, accumulate: true, tile: '128x256/k16' });
    await check({ m: 19, n: 304, k: 20, bias: true, act: 'relu', transB: true, tile: '128x256/k16' });
    // Uniform panels split K into chunks of 32: partial sums go through C, the last
    // chunk applies bias and activation.
    const chunks = { tile: PANEL_TILE, panelK: 32 } as const;
    for (const act of ['none', 'silu', 'gelu', 'relu'] as const) {
      await check({ m: 19, n: 13, k: 70, act, bias: true, ...chunks });
      await check({ m: 19, n: 16, k: 70, act, bias: true, transB: true, ...chunks });
      await check({ m: 10, n: 13, k: 60, act, bias: true, init: true, accumulate: true, ...chunks });
    }
    await check({ m: 10, n: 13, k: 70, bias: true, init: true, accumulate: true, ...chunks, label: 'panels accumulate over K chunks' });
    await check({ m: 19, n: 16, k: 70, batch: 2, bias: true, init: true, accumulate: true, transA: true, ...chunks, label: 'panels accumulate, batched' });
  });

  test('skinny products (a few rows by a [N, K] weight) match the reference: row blocks, partial column groups, epilogues', slow, async () => {
    const tile = SKINNY_TILE;
    for (const m of [1, 2, 3, 5, 8, 9, 17]) await check({ m, n: 13, k: 36, transB: true, tile });
    await check({ m: 4, n: 1, k: 4, transB: true, tile });
    await check({ m: 3, n: 70, k: 260, transB: true, tile, label: 'K longer than one pass of the 32 lanes' });
    for (const act of ['none', 'silu', 'gelu', 'relu'] as const) await check({ m: 6, n: 9, k: 20, transB: true, act, bias: true, tile });
    await check({ m: 5, n: 9, k: 20, transB: true, bias: true, act: 'silu', init: true, accumulate: true, tile });
    await check({ m: 3, n: 9, k: 12, transB: true, offsetA: 8, offsetB: 4, offsetC: 5, tile, label: 'skinny with offsets' });
  });

  test('a real GPU takes the skinny path for few rows when it can; other products and the software GPU keep theirs', async () => {
    assert.equal(skinnyFits({ k: 896, transB: true }), true);
    assert.equal(skinnyFits({ k: 896, transB: false }), false);
    assert.equal(skinnyFits({ k: 896, transB: true, transA: true }), false);
    assert.equal(skinnyFits({ k: 30, transB: true }), false);
    assert.equal(skinnyFits({ k: 896, transB: true, offsetA: 2 }), false);
    assert.equal(skinnyFits({ k: 896, transB: true, batch: 2 }), false);
    const rt = await gpu();
    const hardware = { gpu: rt.gpu, caps: { ...rt.caps, compatibility: false }, policy: rt.policy } as unknown as typeof rt;
    const decode = (m: number, n: number) => autoTile(hardware, { m, n, k: 896, transB: true });
    assert.equal(decode(1, 151936), SKINNY_TILE);
    assert.equal(decode(32, 151936), SKINNY_TILE);
    assert.notEqual(decode(33, 151936), SKINNY_TILE, 'the LM head at more rows goes back to the tiles');
    assert.equal(decode(64, 4864), SKINNY_TILE);
    assert.notEqual(decode(65, 4864), SKINNY_TILE);
    if (rt.caps.compatibility) assert.notEqual(autoTile(rt, { m: 1, n: 4864, k: 896, transB: true }), SKINNY_TILE, 'the software GPU keeps its panels');
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => matmulKernel(rt, { a: t.buffer, b: zeros([64]).buffer, out: zeros([64]).buffer, m: 2, n: 2, k: 3, transB: true, tile: SKINNY_TILE }),
        /the skinny tile needs transB without transA, batch 1, and k, offsetA, offsetB multiples of 4/);
    });
  });

  test('the software GPU picks uniform panels for large products; other adapters keep the workgroup tiles', async () => {
    const rt = await gpu();
    if (rt.caps.compatibility) {
      assert.equal(chooseTile(rt, 1600, 768, 1, 256), 'panels/k128');
      assert.notEqual(chooseTile(rt, 9, 6, 3, 5), 'panels/k128', 'tiny products are not worth the packing dispatches');
    }
    const hardware = { gpu: rt.gpu, caps: { ...rt.caps, compatibility: false }, policy: rt.policy } as unknown as typeof rt;
    assert.equal(chooseTile(hardware, 1600, 768, 1, 256), '128x128/t16');
    assert.equal(chooseTile(hardware, 100, 100, 1, 256), '64x64/k8');
    // The 128x256 tile for the layouts that run it fastest, on grids of enough of them.
    assert.equal(chooseTile(hardware, 4096, 1024, 1, 4864, 'nn'), '128x256/k16');
    assert.equal(chooseTile(hardware, 4096, 896, 1, 4864, 'nn'), '128x128/t16', '896 columns are 3.5 wide tiles but 7 whole 128x128 ones');
    assert.equal(chooseTile(hardware, 4000, 900, 1, 4864, 'nn'), '128x256/k16', 'neither tile divides the output: the wide one');
    assert.equal(chooseTile(hardware, 4096, 896, 1, 4864, 'nn', false), '128x128/t16', 'an epilogue takes main and its 128x128 tile');
    assert.equal(chooseTile(hardware, 4096, 896, 1, 4864, 'nt'), '128x128/t16', 'B transposed on a small output');
    assert.equal(chooseTile(hardware, 4096, 4864, 1, 896, 'nt'), '128x128/t16', 'B transposed on a large output: not the wide tile');
    assert.equal(chooseTile(hardware, 4096, 896, 1, 4864, 'tn'), '128x128/t16');
    assert.equal(chooseTile(hardware, 1024, 1024, 1, 1024, 'nn'), '128x128/t16', 'a grid of 32 128x256 tiles is too few');
    assert.equal(chooseTile(hardware, 2048, 896, 1, 30464, 'nn'), '128x128/t16', 'a small plain output goes to main, cut along k');
  });

  test('launcher errors name the problem', slow, async () => {
    const rt = await gpu();
    await scopeAsync(async () => {
      const t = zeros([64]);
      assert.throws(() => matmulKernel(rt, { a: t.buffer, b: t.buffer, out: zeros([64]).buffer, m: 100, n: 1, k: 1 }), /matmul: A needs 400 bytes/);
      assert.throws(() => matmulKernel(rt, { a: t.buffer, b: t.buffer, out: t.buffer, m: 1, n: 1, k: 1 }), /output buffer is also an input/);
      assert.throws(() => matmulKernel(rt, { a: t.buffer, b: t.buffer, out: zeros([64]).buffer, m: 2, n: 2, k: 1, batch: 2, strideC: 1 }), /overlap/);
      assert.throws(() => matmulKernel(rt, { a: zeros([128]).buffer, b: zeros([128]).buffer, out: zeros([128]).buffer, m: 1, n: 1, k: 70, act: 'silu', accumulate: true, tile: PANEL_TILE, panelK: 32 }),
        /matmul: tile panels\/k128 cannot split k = 70 over 2 dispatches \(panels of 32 k\) under an accumulated activation/);
      const small = { a: zeros([128]).buffer, b: zeros([128]).buffer, out: zeros([128]).buffer, m: 1, n: 1, k: 8 };
      assert.throws(() => matmulKernel(rt, { ...small, tile: '64x64/k8', panelK: 32 }), /matmul: panelK is for the panel tile, not 64x64\/k8/);
      assert.throws(() => matmulKernel(rt, { ...small, tile: PANEL_TILE, panelK: 48 }), /matmul: panelK = 48 must be a power of two from 4 to 128/);
    });
  });
});

/** Reference for op-level matmul on shapes given as [lead..., r, c]. */
function opRef(A: Float32Array, as: number[], B: Float32Array, bs: number[], transA = false, transB = false): Float32Array {
  const [m, k] = transA ? [as.at(-1)!, as.at(-2)!] : [as.at(-2)!, as.at(-1)!];
  const n = transB ? bs.at(-2)! : bs.at(-1)!;
  const batch = Math.max(A.length / (m * k), B.length / (k * n));
  return ref.matmul({
    a: A, b: B, m, n, k, batch, transA, transB,
    strideA: A.length === m * k ? 0 : m * k,
    strideB: B.length === k * n ? 0 : k * n,
  });
}

const numel = (s: number[]) => s.reduce((x, y) => x * y, 1);

describe('matmul op', () => {
  test('2D, batched against a shared operand, both batched, 4D', slow, async () => {
    await gpu();
    const cases: [number[], number[], boolean, boolean, number[]][] = [
      [[5, 3], [3, 4], false, false, [5, 4]],
      [[2, 5, 3], [4, 3], false, true, [2, 5, 4]],
      [[2, 3, 5], [3, 4], true, false, [2, 5, 4]],
      [[5, 3], [2, 3, 4], false, false, [2, 5, 4]],
      [[2, 5, 3], [2, 4, 3], false, true, [2, 5, 4]],
      [[2, 3, 5, 3], [1, 3, 4], false, false, [2, 3, 5, 4]],
      [[2, 3, 3, 5], [2, 3, 4, 3], true, true, [2, 3, 5, 4]],
    ];
    for (const [as, bs, transA, transB, want] of cases) {
      const A = randn(numel(as), seed++);
      const B = randn(numel(bs), seed++);
      await scopeAsync(async () => {
        const y = matmul(tensor(A, as), tensor(B, bs), { transA, transB });
        assert.deepEqual([...y.shape], want);
        assertClose(await read(y), opRef(A, as, B, bs, transA, transB), { atol: 1e-4, label: `${as} @ ${bs}` });
      });
    }
  });

  test('backward passes finite differences for every transpose, batched and shared operands', slow, async () => {
    await gpu();
    for (const [transA, transB] of TRANS) {
      const sa = (lead: number[]) => [...lead, ...(transA ? [4, 3] : [3, 4])];
      const sb = (lead: number[]) => [...lead, ...(transB ? [5, 4] : [4, 5])];
      const layouts: [number[], number[]][] = [[[], []], [[2], []], [[], [2]], [[2], [2]]];
      for (const [la, lb] of layouts) {
        await gradCheck((a, b) => matmul(a, b, { transA, transB }), [
          { data: randn(numel(sa(la)), seed++), shape: sa(la) },
          { data: randn(numel(sb(lb)), seed++), shape: sb(lb) },
        ], { label: `matmul ${transA ? 'T' : 'N'}${transB ? 'T' : 'N'} ${sa(la)} @ ${sb(lb)}` });
      }
    }
  });

  test('linear matches x @ W^T + b and passes finite differences', slow, async () => {
    await gpu();
    const x = randn(2 * 3 * 5, seed++);
    const w = randn(4 * 5, seed++);
    const b = randn(4, seed++);
    await scopeAsync(async () => {
      const y = linear(tensor(x, [2, 3, 5]), tensor(w, [4, 5]), tensor(b, [4]));
      assert.deepEqual([...y.shape], [2, 3, 4]);
      assertClose(await read(y), ref.matmul({ a: x, b: w, bias: b, m: 6, n: 4, k: 5, transB: true }), { atol: 1e-4 });
    });
    await gradCheck((xt, wt, bt) => linear(xt, wt, bt), [
      { data: x, shape: [2, 3, 5] }, { data: w, shape: [4, 5] }, { data: b, shape: [4] },
    ], { label: 'linear with bias' });
    await gradCheck((xt, wt) => linear(xt, wt), [
      { data: randn(7, seed++), shape: [7] }, { data: randn(21, seed++), shape: [3, 7] },
    ], { label: 'linear on a vector' });
  });

  test('shape errors name the op and the shapes', slow, async () => {
    await gpu();
    await scopeAsync(async () => {
      const t = (s: number[]) => tensor(new Float32Array(numel(s)), s);
      assert.throws(() => matmul(t([2, 3]), t([4, 5])), /matmul: \[2, 3\] @ \[4, 5\]: inner dimensions 3 and 4 differ/);
      assert.throws(() => matmul(t([2, 3]), t([5, 4]), { transA: true, transB: true }), /matmul: \[2, 3\]\^T @ \[5, 4\]\^T: inner dimensions 2 and 4 differ/);
      assert.throws(() => matmul(t([2, 2, 3]), t([3, 3, 4])), /batch dims \[2\] and \[3\] differ/);
      assert.throws(() => matmul(t([3]), t([3, 4])), /matmul: \[3\] @ \[3, 4\]: both operands need at least 2 dims/);
      assert.throws(() => linear(t([2, 5]), t([4, 6])), /linear: x \[2, 5\], weight \[4, 6\]: x's last dim must be in = 6/);
      assert.throws(() => linear(t([2, 6]), t([4, 6]), t([5])), /linear: .*bias \[5\]: bias must be \[4\]/);
      assert.throws(() => matmul(tensor(new Int32Array(4), [2, 2]), t([2, 2])), /matmul: a has dtype i32, expected f32/);
    });
  });
});
