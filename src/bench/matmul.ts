// Matmul throughput: square sizes and the Qwen2.5-0.5B training shapes at 4096
// tokens (forward x @ W^T, backward dX = dY @ W and dW = dY^T @ X), each at every
// tile size the device runs, the launcher's own tile marked `auto`, then "as trained":
// through the launcher with nothing forced (so split-K where it cuts k), LM-head
// products in the trainer's vocabulary chunks. Times are wall time around rt.sync()
// (timing.ts): the median of several samples, each repeating the product until it is
// long enough that the submit round trip does not count, a shape's kernels taking
// turns sample by sample (timeInterleaved). Every row also carries the error of
// sampled outputs against an f64 dot product, so a fast wrong kernel cannot pass for a
// fast one.
//
// Operands or outputs over the binding limit (the lm head's [4096 x 151936] logits
// are 2.5 GB, past the H200's 2 GiB) run as equal chunks of rows reusing one set of
// chunk buffers; `chunks` says how many.

import type { Runtime } from '../gpu/runtime.ts';
import { sizeClass } from '../gpu/buffer_pool.ts';
import { matmul } from '../kernels/matmul/matmul.ts';
import { autoTile } from '../kernels/matmul/select.ts';
import { matmulSkinnyHalf, skinnyFits } from '../kernels/matmul/skinny.ts';
import { MATMUL_TILES, SKINNY_TILE, tileFits, type MatmulTile } from '../kernels/matmul/tiles.ts';
import { decodeRuns, matmulTensor, tensorMatmulAvailable } from '../kernels/matmul/tensor.ts';
import { packF16 } from '../kernels/half.ts';
import { defaultChunk } from '../tensor/ops/logprob.ts';
import { mulberry32 } from '../util/random.ts';
import { median, timePrimed } from './timing.ts';

export interface MatmulShape {
  name: string;
  m: number;
  n: number;
  k: number;
  transA?: boolean;
  transB?: boolean;
  /**
   * The LM head's vocabulary axis: the trainer runs the product one vocabulary chunk
   * at a time (tensor/ops/logprob.ts), so its "as trained" row does too.
   */
  vocab?: 'm' | 'n' | 'k';
}

export interface MatmulBenchOptions {
  /** Shapes besides the squares; default the Qwen2.5-0.5B ones. */
  shapes?: MatmulShape[];
  tiles?: MatmulTile[];
  /** Timed samples per row (the median is reported). */
  iters?: number;
  /** Shortest sample, in ms (default 100). */
  sampleMs?: number;
  /** Vocabulary rows per chunk for the "as trained" LM-head rows; default the trainer's. */
  vocabChunk?: number;
}

/** The projections of Qwen2.5-0.5B at `tokens` tokens: forward and both gradients. */
export function qwenMatmulShapes(tokens = 4096): MatmulShape[] {
  const t = tokens;
  const h = 896;
  const f = 4864;
  const v = 151936;
  return [
    { name: 'mlp up/gate: x @ W^T', m: t, n: f, k: h, transB: true },
    { name: 'mlp down: x @ W^T', m: t, n: h, k: f, transB: true },
    { name: 'lm head: x @ W^T', m: t, n: v, k: h, transB: true, vocab: 'n' },
    { name: 'mlp up/gate dX: dY @ W', m: t, n: h, k: f },
    { name: 'mlp down dX: dY @ W', m: t, n: f, k: h },
    { name: 'lm head dX: dY @ W', m: t, n: h, k: v, vocab: 'k' },
    { name: 'mlp up/gate dW: dY^T @ X', m: f, n: h, k: t, transA: true },
    { name: 'mlp down dW: dY^T @ X', m: h, n: f, k: t, transA: true },
    { name: 'lm head dW: dY^T @ X', m: v, n: h, k: t, transA: true, vocab: 'm' },
  ];
}

/** A decode step's products of Qwen2.5-0.5B at `rows` rows (a batch of sequences, one token each). */
export function decodeMatmulShapes(rows: number): MatmulShape[] {
  return [
    { name: `decode q/o proj x${rows}`, m: rows, n: 896, k: 896, transB: true },
    { name: `decode mlp up/gate x${rows}`, m: rows, n: 4864, k: 896, transB: true },
    { name: `decode mlp down x${rows}`, m: rows, n: 896, k: 4864, transB: true },
    { name: `decode lm head x${rows}`, m: rows, n: 151936, k: 896, transB: true },
  ];
}

// Operand contents: a random pattern repeated, value(i) = PATTERN[i % PERIOD], so
// uploads stream one host block and the CPU check needs no copy of the operands.
export const PERIOD = 65521;
const BLOCK = PERIOD * 256;

export function pattern(seed: number): Float32Array {
  const r = mulberry32(seed);
  const p = new Float32Array(PERIOD);
  for (let i = 0; i < PERIOD; i++) p[i] = r() * 2 - 1;
  return p;
}

export function fill(rt: Runtime, buf: GPUBuffer, elements: number, p: Float32Array): void {
  const block = new Float32Array(Math.min(BLOCK, elements));
  for (let i = 0; i < block.length; i++) block[i] = p[i % PERIOD];
  for (let at = 0; at < elements; at += BLOCK) {
    rt.upload(buf, at * 4, block.subarray(0, Math.min(BLOCK, elements - at)));
  }
}

/**
 * Rows per chunk: halved until every buffer a chunk binds, in the pool's size class
 * for it, fits the binding limit.
 */
export function chunkRows(rt: Runtime, s: MatmulShape): number {
  const limit = rt.gpu.limits.maxStorageBufferBindingSize;
  let rows = s.m;
  while (rows > 1 && sizeClass(rows * Math.max(s.n, s.k) * 4, limit) > limit) rows = Math.ceil(rows / 2);
  return rows;
}

// Largest |C - ref| / sum_k |a_k b_k| over a few sampled outputs of the first chunk
// (the bound f32 rounding of a K-term dot product scales with).
async function sampledError(rt: Runtime, s: MatmulShape, rows: number, out: GPUBuffer, pa: Float32Array, pb: Float32Array): Promise<number> {
  const { n, k } = s;
  const r = mulberry32(5);
  let worst = 0;
  for (let t = 0; t < 4; t++) {
    const i = Math.floor(r() * rows);
    const row = new Float32Array(await rt.read(out, i * n * 4, n * 4));
    for (let u = 0; u < 8; u++) {
      const j = Math.floor(r() * n);
      let sum = 0;
      let mag = 0;
      for (let q = 0; q < k; q++) {
        const x = pa[(s.transA ? q * rows + i : i * k + q) % PERIOD];
        const y = pb[(s.transB ? j * k + q : q * n + j) % PERIOD];
        sum += x * y;
        mag += Math.abs(x * y);
      }
      worst = Math.max(worst, Math.abs(row[j] - sum) / Math.max(mag, 1e-30));
    }
  }
  return worst;
}

/** The f16 tensor-core kernel (its own tile choice), benchmarked beside the f32 tiles. */
const TENSOR = 'tensor cores';
/** The skinny kernel reading B as an f16 copy (decode steps' f16 weights), beside the f32 one. */
const SKINNY_F16 = 'skinny f16';
/** The tensor-core kernel reading B as an f16 copy (wide decode steps' f16 weights). */
const TENSOR_F16 = 'tensor cores f16';
/** The same with k cut into the runs a decode step takes there (decodeRuns). */
const TENSOR_F16_RUNS = 'tensor cores f16, runs of k';
type BenchKernel = MatmulTile | typeof TENSOR | typeof SKINNY_F16 | typeof TENSOR_F16 | typeof TENSOR_F16_RUNS;
const readsHalfB = (k: BenchKernel) => k === SKINNY_F16 || k === TENSOR_F16 || k === TENSOR_F16_RUNS;

// Sampled outputs must stay this close (relative to the dot product's magnitude): f32
// rounding stays far below 1e-3; f16 operands move a product by about 2^-11 each.
const MAX_ERROR: Record<'f32' | 'f16', number> = { f32: 1e-3, f16: 4e-3 };

type OperandRole = 'A' | 'B' | 'C';
/**
 * A shape's operand buffer for `role` with at least `elements` elements: A and B hold
 * the operand patterns (every element from the first one on), so a smaller product
 * reads the same values from a prefix of them and its error check still holds.
 */
type Operand = (role: OperandRole, elements: number) => GPUBuffer;

/** A kernel of one row, ready to time: `once` runs the whole product; `row` is its row less the timing. */
interface Candidate {
  row: Record<string, unknown>;
  once: () => void;
}

async function benchShape(rt: Runtime, s: MatmulShape, tiles: BenchKernel[], opts: MatmulBenchOptions, trained = false): Promise<object[]> {
  const { m, n, k } = s;
  const transA = s.transA ?? false;
  const transB = s.transB ?? false;
  const limit = rt.gpu.limits.maxStorageBufferBindingSize;
  const base = { kind: 'matmul', name: s.name, m, n, k, transA, transB };
  if (sizeClass(k * n * 4, limit) > limit) return [{ ...base, error: `B (${k * n * 4} bytes) exceeds the binding limit ${limit}` }];
  const rows = chunkRows(rt, s);
  const chunks = Math.ceil(m / rows);
  const pa = pattern(1);
  const pb = pattern(2);
  const held: GPUBuffer[] = [];
  const kept = new Map<OperandRole, { buf: GPUBuffer; elements: number }>();
  const operand: Operand = (role, elements) => {
    const have = kept.get(role);
    if (have && have.elements >= elements) return have.buf;
    const buf = rt.pool.acquire(elements * 4, `bench ${role}`);
    held.push(buf);
    if (role !== 'C') fill(rt, buf, elements, role === 'A' ? pa : pb);
    if (!have || elements > have.elements) kept.set(role, { buf, elements });
    return buf;
  };
  const a = operand('A', rows * k);
  const b = operand('B', k * n);
  const c = operand('C', rows * n);
  try {
    const auto = autoTile(rt, { m: rows, n, k, transA, transB });
    const candidates: Candidate[] = [];
    for (const tile of tiles.filter((t) => (t !== SKINNY_TILE && t !== SKINNY_F16) || skinnyFits({ k, transA, transB }))) {
      let b16: GPUBuffer | null = null;
      if (readsHalfB(tile)) {
        b16 = rt.pool.acquire(k * n * 2, 'bench B f16');
        held.push(b16);
        packF16(rt, b, b16, k * n);
      }
      const product = (chunk: number) => {
        const args = { a, b, out: c, m: chunk, n, k, transA, transB };
        if (tile === TENSOR) matmulTensor(rt, args);
        else if (tile === TENSOR_F16) matmulTensor(rt, { ...args, b: b16!, halfB: true });
        else if (tile === TENSOR_F16_RUNS) matmulTensor(rt, { ...args, b: b16!, halfB: true, runs: decodeRuns(rt, chunk, n, k) });
        else if (tile === SKINNY_F16) matmulSkinnyHalf(rt, { ...args, b: b16!, offsetA: 0, offsetB: 0, offsetC: 0, act: 'none', accumulate: false });
        else matmul(rt, { ...args, tile });
      };
      // Checked after the first chunk alone: later (shorter) chunks overwrite its rows.
      product(Math.min(rows, m));
      const err = await sampledError(rt, s, Math.min(rows, m), c, pa, pb);
      candidates.push({
        row: { ...base, tile, auto: tile === auto, chunks, relErr: err, ok: err < MAX_ERROR[tile === TENSOR || readsHalfB(tile) ? 'f16' : 'f32'] },
        once: () => {
          for (let at = 0; at < m; at += rows) product(Math.min(rows, m - at));
        },
      });
    }
    if (trained) candidates.push(await trainedCandidate(rt, s, opts, operand, pa, pb));
    const times = await timeInterleaved(rt, candidates.map((x) => x.once), opts);
    return candidates.map(({ row }, i) => {
      const ms = times[i];
      const timing: Record<string, number> = { ms, tflops: (2 * m * n * k) / (ms * 1e9) };
      // B streamed once per product: the figure that bounds a decode step's products.
      if (row.tile !== TRAINED) timing.b_gb_s = +((n * k * (readsHalfB(row.tile as BenchKernel) ? 2 : 4)) / (ms * 1e6)).toFixed(1);
      const { relErr, ok, ...rest } = row;
      return { ...rest, ...timing, relErr, ok };
    });
  } finally {
    for (const buf of held) rt.pool.release(buf);
  }
}

/** Most calls of `once` in one sample. */
const MAX_REPS = 1000;

/**
 * Milliseconds per call of each of `onces`, timed in samples of `sampleMs` or MAX_REPS
 * calls (timePrimed) and reported as each one's median. The calls per sample come from
 * a run doubled until it lasts a quarter of a sample: a single call's time is mostly
 * the submit round trip, and scaling from it once gave 2048^3 samples of 3 products,
 * timed 20% slow. The kernels take turns, one sample each per round, each round
 * starting one kernel later, so whatever a stretch of the run brings (a slow start, a
 * host stall that timePrimed does not catch) falls on all of a shape's kernels alike
 * and not on every sample of one row, as when they were timed one after another.
 */
export async function timeInterleaved(rt: Runtime, onces: (() => void)[], opts: MatmulBenchOptions): Promise<number[]> {
  const sampleMs = opts.sampleMs ?? 100;
  const iters = opts.iters ?? 7;
  const reps: number[] = [];
  for (const once of onces) reps.push(await callsPerSample(rt, once, sampleMs));
  const sample = (i: number) => timePrimed(rt, onces[i], reps[i]);
  // One untimed sample of each first.
  for (let i = 0; i < onces.length; i++) await sample(i);
  const samples: number[][] = onces.map(() => []);
  for (let round = 0; round < iters; round++) {
    for (let j = 0; j < onces.length; j++) {
      const i = (round + j) % onces.length;
      samples[i].push((await sample(i)) / reps[i]);
    }
  }
  return samples.map(median);
}

/** Calls of `once` that last about `sampleMs`: a run doubled until it lasts a quarter of that, scaled up. */
async function callsPerSample(rt: Runtime, once: () => void, sampleMs: number): Promise<number> {
  let n = 1;
  let ms: number;
  for (;;) {
    ms = Math.max(await timePrimed(rt, once, n), 1e-3);
    if (ms >= sampleMs / 4 || n >= MAX_REPS) break;
    n *= 2;
  }
  return Math.min(MAX_REPS, Math.max(1, Math.ceil((n * sampleMs) / ms)));
}

/** The row for the product as the trainer records it on the f32 kernels. */
export const TRAINED = 'as trained';

/**
 * `s` as training runs it with tensor cores off: an LM-head product one vocabulary
 * chunk at a time, the chunk tensor/ops/logprob.ts takes by default (dX accumulating
 * over the chunks), each through the launcher's own choices (split-K included). Every
 * chunk reuses one set of buffers (its operands' contents do not change the time),
 * taken from the shape's forced-tile operands where those hold enough, so a shape's
 * rows do not hold two sets at once; the error is checked on the first chunk's product.
 */
async function trainedCandidate(rt: Runtime, s: MatmulShape, opts: MatmulBenchOptions, operand: Operand, pa: Float32Array, pb: Float32Array): Promise<Candidate> {
  const transA = s.transA ?? false;
  const transB = s.transB ?? false;
  const dims = { m: s.m, n: s.n, k: s.k };
  const axis = s.vocab;
  const widths: number[] = [];
  if (axis) {
    const [x, y] = (['m', 'n', 'k'] as const).filter((d) => d !== axis).map((d) => dims[d]);
    const chunk = opts.vocabChunk ?? defaultChunk(rt, x, y, dims[axis]);
    for (let at = 0; at < dims[axis]; at += chunk) widths.push(Math.min(chunk, dims[axis] - at));
  }
  const part = (i: number) => (axis ? { ...dims, [axis]: widths[i] } : dims);
  const first = part(0);
  const a = operand('A', first.m * first.k);
  const b = operand('B', first.k * first.n);
  const c = operand('C', first.m * first.n);
  const product = (i: number) => matmul(rt, { a, b, out: c, ...part(i), transA, transB, accumulate: axis === 'k' && i > 0 });
  const cut = product(0);
  const err = await sampledError(rt, { ...s, ...first }, first.m, c, pa, pb);
  return {
    row: {
      kind: 'matmul', name: s.name, m: s.m, n: s.n, k: s.k, transA, transB, tile: TRAINED, auto: false,
      vocab_chunks: widths.length || undefined, split_k: cut.runs, stream_k: cut.stream, relErr: err, ok: err < MAX_ERROR.f32,
    },
    once: () => {
      for (let i = 0; i < Math.max(widths.length, 1); i++) product(i);
    },
  };
}

/**
 * Decode-step products at each row count, every workgroup tile beside the skinny path
 * and, where the device has them, the tensor cores.
 */
export async function benchDecodeMatmul(rt: Runtime, rowCounts: number[] = [1, 8, 32, 64], opts: MatmulBenchOptions = {}): Promise<object[]> {
  const tiles: BenchKernel[] = ([...Object.keys(MATMUL_TILES), SKINNY_TILE] as MatmulTile[]).filter((t) => t !== '128x128/k16' && tileFits(rt, t));
  if (tensorMatmulAvailable(rt)) tiles.push(TENSOR, TENSOR_F16, TENSOR_F16_RUNS);
  tiles.push(SKINNY_F16);
  const rows: object[] = [];
  for (const m of rowCounts) for (const s of decodeMatmulShapes(m)) rows.push(...(await benchShape(rt, s, tiles, opts)));
  return rows;
}

/** One row per (shape, tile): square `sizes`, then `opts.shapes` (default Qwen2.5-0.5B). */
export async function benchMatmul(rt: Runtime, sizes: number[] = [1024, 2048, 4096, 8192], opts: MatmulBenchOptions = {}): Promise<object[]> {
  const tiles = (opts.tiles ?? (Object.keys(MATMUL_TILES) as MatmulTile[])).filter((t) => tileFits(rt, t));
  const shapes: MatmulShape[] = [
    ...sizes.map((s) => ({ name: `square ${s}`, m: s, n: s, k: s })),
    ...(opts.shapes ?? qwenMatmulShapes()),
  ];
  const rows: object[] = [];
  for (const s of shapes) rows.push(...(await benchShape(rt, s, tiles, opts, true)));
  return rows;
}
