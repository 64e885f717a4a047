// Tensor-core matmul sweep (src/kernels/matmul/tensor.ts) beside the f32 path, each
// (configuration, shape) in a child process of its own with a time limit, so a crash
// (docs/PERFORMANCE.md: a naive subgroup-matrix kernel brought the process down at 2048^3)
// is reported as a row and the sweep goes on. Prints JSON lines (also appended to
// --out when given).
//
//   npx bun dev/tensor_matmul_sweep.ts [options]
//   npm run build && node dist/dev/tensor_matmul_sweep.js [options]   # Node
// With WEBGPU_TOGGLES=allow_unsafe_apis,vulkan_enable_f16_on_nvidia on NVIDIA.
//
// Options (all optional):
//   --tiles a,b      tensor tiles to run (default all of TENSOR_TILES); `f32` is the f32 path (auto tile)
//   --sizes 256,...  square sizes (default 256,512,1024,2048,4096,8192); `none` for none
//   --qwen 0|1       the Qwen2.5-0.5B shapes at 4096 tokens, forward and both gradients (default 1)
//   --split 4,16,64  also run each tile's 2048^3 grid spread over this many dispatches (default 4,16,64; `none`)
//   --no-f32         no f32 rows (the f32 path still runs inside each case for the error check)
//   --timeout S      seconds per child before it is killed (default 120)
//   --budget S       stop starting cases after S seconds in all (default 540: one H200 command is 10 minutes)
//   --ms M           shortest timed sample in ms (default 30)
//   --out FILE       also append every line to FILE
//   --software       allow the software GPU (to try the sweep's machinery; tensor rows then say why they skip)
//
// Rows: {"kind":"sgm", config, name, m, n, k, transA, transB, dispatches, chunks, ms,
// tflops (wall time around rt.sync, median of samples, each repeating the product
// until it lasts --ms), gpu_ms/gpu_tflops (timestamp queries, kernel time only),
// errVsF32 (largest |C - C_f32| over sampled rows, both computed on the GPU from the
// same operands), refMax (largest |C_f32| there), relErr (sampled outputs against an
// f64 dot product of the f16-rounded operands for a tensor tile, of the operands as
// they are for f32, over sum |a b|: only the kernel's own summation error, ~1e-7),
// relErrF32Exact (the same for the f32 path), ok (relErr < 1e-3 and errVsF32 within
// 5% of refMax)}. A child that dies: {"crashed":true, config, name, ..., code,
// signal, phase (the last it reached: init, compile, first-dispatch, check, timing,
// profile), stderr (its tail)}; one that runs out of time adds "timedOut":true.
//
// Products whose buffers exceed one storage binding (the lm head's 4096 x 151936
// logits are 2.5 GB, past the H200's 2 GiB) run as equal chunks of rows reusing one
// set of chunk buffers, as src/bench/matmul.ts does; `chunks` says how many.

import { appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { childToggles, crashRow, lastPhase, phase, runChild } from './child_case.ts';
import { chunkRows, fill, type MatmulShape, pattern, PERIOD, qwenMatmulShapes } from '../src/bench/matmul.ts';
import { timeGpu } from '../src/bench/timing.ts';
import { sizeClass } from '../src/gpu/buffer_pool.ts';
import { initRuntime, type Runtime } from '../src/gpu/runtime.ts';
import { matmul } from '../src/kernels/matmul/matmul.ts';
import { matmulTensor, TENSOR_TILES, tensorMatmulMissing, tensorTileGeometry, type TensorTile } from '../src/kernels/matmul/tensor.ts';
import { roundToF16 } from '../src/reference/matmul_f16.ts';
import { mulberry32 } from '../src/util/random.ts';

interface Case {
  config: TensorTile | 'f32';
  shape: MatmulShape;
  /** Dispatches to spread each chunk's tile grid over (tensor tiles only). */
  dispatches: number;
  sampleMs: number;
  software: boolean;
}

const say = (row: object, out?: string) => {
  const line = JSON.stringify(row);
  console.log(line);
  if (out) appendFileSync(out, `${line}\n`);
};

// ---- child: one case ----

async function startRuntime(software: boolean): Promise<Runtime> {
  phase('init');
  return initRuntime({ toggles: childToggles, requireHardware: !software });
}

async function runCase(c: Case): Promise<object> {
  const rt = await startRuntime(c.software);
  const { m, n, k } = c.shape;
  const transA = c.shape.transA ?? false;
  const transB = c.shape.transB ?? false;
  const base = { kind: 'sgm', config: c.config, name: c.shape.name, m, n, k, transA, transB, dispatches: c.dispatches, adapter: rt.gpu.description };
  if (c.config !== 'f32') {
    const missing = tensorMatmulMissing(rt);
    if (missing) return { ...base, skipped: missing };
  }
  const limit = rt.gpu.limits.maxStorageBufferBindingSize;
  if (sizeClass(k * n * 4, limit) > limit) return { ...base, error: `B (${k * n * 4} bytes) exceeds the binding limit ${limit}` };
  const rows = chunkRows(rt, c.shape);
  const chunks = Math.ceil(m / rows);
  const pa = pattern(1);
  const pb = pattern(2);
  const a = rt.pool.acquire(rows * k * 4, 'sgm A');
  const b = rt.pool.acquire(k * n * 4, 'sgm B');
  const out = rt.pool.acquire(rows * n * 4, 'sgm C');
  const ref = rt.pool.acquire(rows * n * 4, 'sgm C f32');
  fill(rt, a, rows * k, pa);
  fill(rt, b, k * n, pb);
  await rt.sync();

  const product = (target: GPUBuffer, mRows: number, config: Case['config']) => {
    if (config === 'f32') {
      matmul(rt, { a, b, out: target, m: mRows, n, k, transA, transB });
      return;
    }
    const g = tensorTileGeometry(config, transA, transB);
    const tiles = Math.ceil(mRows / g.bm) * Math.ceil(n / g.bn);
    matmulTensor(rt, { a, b, out: target, m: mRows, n, k, transA, transB, tile: config, tilesPerDispatch: Math.ceil(tiles / c.dispatches) });
  };
  const once = () => {
    for (let at = 0; at < m; at += rows) product(out, Math.min(rows, m - at), c.config);
  };

  // One dispatch (or one split grid) of the first chunk, waited for alone: a crash
  // here is the kernel or a single dispatch, not the timing loop's queue.
  phase('compile');
  product(out, Math.min(rows, m), c.config);
  phase('first-dispatch');
  await rt.sync();
  phase('check');
  matmul(rt, { a, b, out: ref, m: Math.min(rows, m), n, k, transA, transB });
  const errors = await sampledErrors(rt, c.shape, Math.min(rows, m), out, ref, pa, pb, c.config !== 'f32');

  phase('timing');
  const t0 = performance.now();
  once();
  await rt.sync();
  const estimate = Math.max(performance.now() - t0, 1e-3);
  const reps = Math.min(200, Math.max(1, Math.ceil(c.sampleMs / estimate)));
  const sample = await timeGpu(rt, () => {
    for (let r = 0; r < reps; r++) once();
  }, { warmup: 1, iters: 5 });
  const ms = sample / reps;
  const flops = 2 * m * n * k;

  let gpu: { gpu_ms?: number; gpu_tflops?: number } = {};
  if (rt.caps.timestampQuery) {
    phase('profile');
    rt.startProfiling();
    try {
      once();
      const times = await rt.profile();
      const gpuMs = times.filter((t) => t.kernel.startsWith(c.config === 'f32' ? 'matmul/' : 'matmul/tensor.')).reduce((s, t) => s + t.ms, 0);
      gpu = { gpu_ms: +gpuMs.toFixed(4), gpu_tflops: +(flops / (gpuMs * 1e9)).toPrecision(4) };
    } finally {
      await rt.stopProfiling();
    }
  }
  return {
    ...base, chunks, reps, ms: +ms.toFixed(4), tflops: +(flops / (ms * 1e9)).toPrecision(4), ...gpu, ...errors,
    ok: errors.relErr < 1e-3 && errors.errVsF32 <= 0.05 * Math.max(errors.refMax, 1e-30),
  };
}

/**
 * Errors on the first chunk: 8 sampled rows (the first and last among them) of C
 * against the f32 path's, and 8 elements of each against f64 dot products (of the
 * f16-rounded operands when `f16`).
 */
async function sampledErrors(rt: Runtime, s: MatmulShape, rows: number, out: GPUBuffer, ref: GPUBuffer, pa: Float32Array, pb: Float32Array, f16: boolean) {
  const { n, k } = s;
  const r = mulberry32(5);
  const ha = pa.map(roundToF16);
  const hb = pb.map(roundToF16);
  const picks = [0, rows - 1, ...Array.from({ length: 6 }, () => Math.floor(r() * rows))];
  let errVsF32 = 0;
  let refMax = 0;
  let relErr = 0;
  let relErrF32Exact = 0;
  for (const i of picks) {
    const got = new Float32Array(await rt.read(out, i * n * 4, n * 4));
    const want = new Float32Array(await rt.read(ref, i * n * 4, n * 4));
    for (let j = 0; j < n; j++) {
      errVsF32 = Math.max(errVsF32, Math.abs(got[j] - want[j]));
      refMax = Math.max(refMax, Math.abs(want[j]));
    }
    for (const j of [0, n - 1, ...Array.from({ length: 6 }, () => Math.floor(r() * n))]) {
      let exact = 0;
      let half = 0;
      let mag = 0;
      for (let q = 0; q < k; q++) {
        const ia = (s.transA ? q * rows + i : i * k + q) % PERIOD;
        const ib = (s.transB ? j * k + q : q * n + j) % PERIOD;
        exact += pa[ia] * pb[ib];
        half += ha[ia] * hb[ib];
        mag += Math.abs(pa[ia] * pb[ib]);
      }
      relErr = Math.max(relErr, Math.abs(got[j] - (f16 ? half : exact)) / Math.max(mag, 1e-30));
      relErrF32Exact = Math.max(relErrF32Exact, Math.abs(want[j] - exact) / Math.max(mag, 1e-30));
    }
  }
  return { errVsF32, refMax, relErr, relErrF32Exact };
}

async function probe(software: boolean): Promise<object> {
  const rt = await startRuntime(software);
  const l = rt.gpu.limits as unknown as Record<string, number>;
  const limits = Object.fromEntries(['maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupsPerDimension'].map((x) => [x, l[x]]));
  return { kind: 'sgm-probe', adapter: rt.gpu.description, runtime: rt.gpu.runtime, toggles: childToggles, caps: rt.caps, limits, missing: tensorMatmulMissing(rt) };
}

// ---- parent: the sweep ----

function option(args: string[], name: string): string | undefined {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
}

const list = (s: string | undefined, fallback: string[]) => (s === undefined ? fallback : s === 'none' ? [] : s.split(',').map((x) => x.trim()).filter(Boolean));

const self = fileURLToPath(import.meta.url);

async function sweep(args: string[]): Promise<void> {
  const out = option(args, '--out');
  const software = args.includes('--software');
  const timeoutS = Number(option(args, '--timeout') ?? 120);
  const budgetS = Number(option(args, '--budget') ?? 540);
  const sampleMs = Number(option(args, '--ms') ?? 30);
  const allTiles = Object.keys(TENSOR_TILES);
  const tiles = list(option(args, '--tiles'), [...allTiles, ...(args.includes('--no-f32') ? [] : ['f32'])]);
  for (const t of tiles) if (t !== 'f32' && !allTiles.includes(t)) throw new Error(`unknown tile ${t} (known: ${allTiles.join(', ')}, f32)`);
  const sizes = list(option(args, '--sizes'), ['256', '512', '1024', '2048', '4096', '8192']).map(Number);
  const splits = list(option(args, '--split'), ['4', '16', '64']).map(Number);
  const shapes: MatmulShape[] = [
    ...sizes.map((s) => ({ name: `square ${s}`, m: s, n: s, k: s })),
    ...(option(args, '--qwen') === '0' ? [] : qwenMatmulShapes(4096)),
  ];
  const started = performance.now();
  const common = ['--ms', String(sampleMs), ...(software ? ['--software'] : [])];

  const p = await runChild(self, ['--probe', ...common], timeoutS);
  if (!p.row) {
    say(crashRow('sgm', { what: 'probe' }, p), out);
    process.exit(1);
  }
  say(p.row, out);
  const tensorOk = (p.row as { missing: string | null }).missing === null;

  // Ascending sizes, every tile at one size before the next: a crash shows at which
  // size it starts, for which tiles. The split 2048 grids follow the single-dispatch ones.
  const cases: Case[] = [];
  for (const shape of shapes) {
    for (const config of tiles as Case['config'][]) {
      cases.push({ config, shape, dispatches: 1, sampleMs, software });
      if (config !== 'f32' && shape.name === 'square 2048') {
        for (const d of splits) cases.push({ config, shape, dispatches: d, sampleMs, software });
      }
    }
  }
  const crashes: object[] = [];
  const failures: object[] = [];
  const skipped: string[] = [];
  for (const c of cases) {
    const what = { config: c.config, name: c.shape.name, m: c.shape.m, n: c.shape.n, k: c.shape.k, transA: !!c.shape.transA, transB: !!c.shape.transB, dispatches: c.dispatches };
    if (c.config !== 'f32' && !tensorOk) {
      skipped.push(`${c.config} ${c.shape.name}`);
      continue;
    }
    if ((performance.now() - started) / 1000 > budgetS) {
      skipped.push(`${c.config} ${c.shape.name} x${c.dispatches}`);
      continue;
    }
    const r = await runChild(self, ['--case', JSON.stringify(c)], timeoutS);
    if (r.row && r.code === 0) {
      say(r.row, out);
    } else if (r.row && 'error' in r.row) {
      const row = { ...what, ...r.row, code: r.code, phase: lastPhase(r) };
      failures.push(row);
      say(row, out);
    } else {
      const row = crashRow('sgm', what, r);
      crashes.push(row);
      say(row, out);
    }
  }
  const named = (rows: object[]) => rows.map((x) => x as { config: string; name: string; dispatches: number; phase?: string }).map((x) => `${x.config} ${x.name} x${x.dispatches} (${x.phase})`);
  say({
    kind: 'sgm-summary', seconds: Math.round((performance.now() - started) / 1000), cases: cases.length,
    crashed: named(crashes), failed: named(failures), notRun: skipped,
    notRunWhy: tensorOk ? (skipped.length ? `--budget ${budgetS}s spent` : undefined) : (p.row as { missing: string }).missing,
  }, out);
}

const args = process.argv.slice(2);
if (args.includes('--case') || args.includes('--probe')) {
  try {
    const row = args.includes('--probe') ? await probe(args.includes('--software')) : await runCase(JSON.parse(option(args, '--case')!) as Case);
    console.log(JSON.stringify(row));
    process.exit(0);
  } catch (e) {
    // A JavaScript-level failure (validation error, lost device): a row, not a crash.
    console.log(JSON.stringify({ kind: 'sgm', error: `${(e as Error).name}: ${(e as Error).message}` }));
    process.exit(1);
  }
} else {
  await sweep(args);
}
