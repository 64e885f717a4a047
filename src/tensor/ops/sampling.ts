// Inference ops over the vocabulary that never bring a [rows x vocab] array back to
// the host: next-token sampling per row (temperature, top-k, top-p, a seeded uniform,
// and optionally the row's top-n tokens), the same as a step of a decoding loop whose
// rows' progress, stop checks and next ids stay on the GPU between readbacks, and the
// log-prob and rank of given target tokens (vLLM's prompt_logprobs). They record no
// gradient.

import { forwardMatmul } from '../../kernels/matmul/precision.ts';
import * as sk from '../../kernels/sampling.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { keep } from '../scope.ts';
import { empty, tensor, type Tensor } from '../tensor.ts';
import { clone, takeRows } from './create.ts';
import { checkHeadInputs, inverseTemperature, targetIds, type Targets } from './logprob.ts';

export { GREEDY_BELOW, type DecodeRowState, type RowSampling } from '../../kernels/sampling.ts';

export interface SampledTokens {
  ids: Int32Array;
  /** Log-prob of each id under the unfiltered softmax(logits / T) (T = 1 for greedy rows). */
  logprobs: Float32Array;
  /** Candidate threshold keys (reference/sampling.ts floatKey): what survived top-k / top-p. */
  thresholds: Uint32Array;
  /** Top-list slots per row: row r's list is topIds[r * topN ..], its first rows[r].topN entries. */
  topN: number;
  /** [rows, topN]: each row's most likely tokens, largest logit first (ties by smaller id). */
  topIds: Int32Array;
  /** [rows, topN]: their log-probs under the same distribution as `logprobs`. */
  topLogprobs: Float32Array;
}

function checkRow(op: string, r: sk.RowSampling, i: number): void {
  const bad = (what: string) => new RangeError(`${op}: row ${i}: ${what}`);
  if (!Number.isFinite(r.temperature) || r.temperature < 0) throw bad(`temperature must be a finite number >= 0, got ${r.temperature}`);
  if (!(r.topP > 0 && r.topP <= 1)) throw bad(`top_p must be in (0, 1], got ${r.topP}`);
  if (!Number.isInteger(r.topK)) throw bad(`top_k must be an integer, got ${r.topK}`);
  if (!(r.u >= 0 && r.u < 1)) throw bad(`u must be in [0, 1), got ${r.u}`);
  if (r.topN !== undefined && !(Number.isInteger(r.topN) && r.topN >= 0)) throw bad(`topN must be an integer >= 0, got ${r.topN}`);
}

/**
 * One token per row of `logits` [rows, vocab], each row with its own settings and
 * uniform. The result stays on the GPU as u32 [3 + 2 * topN, rows]: ids, log-prob bits,
 * threshold keys, then the top lists (topN = the largest row topN, at most vocab);
 * `readSampled` brings it back. A decoding loop takes `sampleStep` instead, which keeps
 * the rows' progress on the GPU.
 */
export function sampleTokens(logits: Tensor, rows: readonly sk.RowSampling[]): Tensor {
  const op = 'sampleTokens';
  expectDType(op, 'logits', logits.dtype, 'f32');
  if (logits.rank !== 2 || logits.shape[1] === 0) throw new ShapeError(`${op}: logits ${fmt(logits.shape)} are not [rows, vocab]`);
  const [n, vocab] = logits.shape;
  if (rows.length !== n) throw new ShapeError(`${op}: ${rows.length} sampling rows for logits ${fmt(logits.shape)}`);
  rows.forEach((r, i) => checkRow(op, r, i));
  const rt = logits.storage.rt;
  const stride = sk.topStride(rows, vocab);
  const out = empty([3 + 2 * stride, n], 'u32', rt);
  if (n === 0) return out;
  const params = tensor(new Uint32Array(sk.packRowParams(rows, vocab)), [n * (sk.ROW_PARAMS_BYTES / 4)], 'u32', rt);
  sk.sampleRows(rt, logits.buffer, params.buffer, out.buffer, n, vocab, stride);
  params.dispose();
  return out;
}

/** The results of one step for n rows, laid out as sampleTokens writes them, from byte `start` of `bytes`. */
function sampledView(bytes: ArrayBuffer, start: number, n: number, topN: number): SampledTokens {
  const at = (k: number) => start + 4 * n * k;
  return {
    ids: new Int32Array(bytes, at(0), n),
    logprobs: new Float32Array(bytes, at(1), n),
    thresholds: new Uint32Array(bytes, at(2), n),
    topN,
    topIds: new Int32Array(bytes, at(3), n * topN),
    topLogprobs: new Float32Array(bytes, at(3 + topN), n * topN),
  };
}

/** Reads `sampleTokens`' result back (the caller still owns and disposes it). */
export async function readSampled(sampled: Tensor): Promise<SampledTokens> {
  const [slots, n] = sampled.shape;
  const bytes = n === 0 ? new ArrayBuffer(0) : ((await sampled.toArray()).buffer as ArrayBuffer);
  return sampledView(bytes, 0, n, (slots - 3) / 2);
}

/**
 * A decoding loop's rows on the GPU, for `sampleStep`: their settings and progress,
 * their stop ids, the ids the next step reads, and a record of up to `slots` steps'
 * results that one readback (`readSteps`) brings back. Made outside any scope; the
 * owner disposes it (`disposeDecodeRows`).
 */
export interface DecodeRows {
  readonly count: number;
  readonly vocab: number;
  /** Top-list slots per row in the record: the largest topN of the rows. */
  readonly topStride: number;
  readonly slots: number;
  /** sample_step's DecodeRow per row (u32 [count, 12]). */
  readonly state: Tensor;
  readonly stops: Tensor;
  /** [count] i32: each row's last sampled id, the next step's input. */
  readonly ids: Tensor;
  /** [count, 1] i32: each row's position id for the next step, advanced by every step. */
  readonly positions: Tensor;
  /** [slots, 3 + 2 * topStride, count] u32: each step's results as sampleTokens lays them out. */
  readonly record: Tensor;
}

/** What the first step of a chunk reads: each row's last id and position id. */
export interface StepInputs {
  /** Any valid ids before a prefill. */
  ids: Int32Array;
  /** Each step adds one before the next reads them. */
  positions: Int32Array;
}

function checkDecodeRows(op: string, rows: readonly sk.DecodeRowState[], start: StepInputs, vocab: number): void {
  const n = rows.length;
  if (n === 0) throw new ShapeError(`${op}: no rows`);
  if (start.ids.length !== n || start.positions.length !== n) throw new ShapeError(`${op}: ${start.ids.length} ids and ${start.positions.length} positions for ${n} rows`);
  rows.forEach((r, i) => {
    checkRow(op, { ...r, u: 0 }, i);
    const bad = (what: string) => new RangeError(`${op}: row ${i}: ${what}`);
    if (!Number.isSafeInteger(r.seed)) throw bad(`seed must be a safe integer, got ${r.seed}`);
    if (!Number.isInteger(r.produced) || r.produced < 0 || !Number.isInteger(r.maxTokens) || r.maxTokens < 0) throw bad(`produced ${r.produced} and maxTokens ${r.maxTokens} must be integers >= 0`);
    r.stopIds.forEach((id) => {
      if (!Number.isInteger(id) || id < 0 || id >= vocab) throw bad(`stop id ${id} is not a token id in [0, ${vocab})`);
    });
  });
}

/**
 * Uploads `rows` (their progress as the host knows it) for a loop of up to `slots`
 * steps between readbacks, and the inputs its first step reads.
 */
export function decodeRows(rows: readonly sk.DecodeRowState[], start: StepInputs, vocab: number, slots: number): DecodeRows {
  const op = 'decodeRows';
  checkDecodeRows(op, rows, start, vocab);
  if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`${op}: slots must be a positive integer, got ${slots}`);
  const n = rows.length;
  const packed = sk.packDecodeRows(rows, vocab);
  const topStride = sk.topStride(rows, vocab);
  return {
    count: n, vocab, topStride, slots,
    state: keep(tensor(new Uint32Array(packed.rows), [n, sk.DECODE_ROW_BYTES / 4], 'u32')),
    stops: keep(tensor(packed.stops, [packed.stops.length], 'u32')),
    ids: keep(tensor(start.ids, [n], 'i32')),
    positions: keep(tensor(start.positions, [n, 1], 'i32')),
    record: keep(empty([slots, 3 + 2 * topStride, n], 'u32')),
  };
}

/**
 * Rows `rows` of `d` (indices, in their new order) as new decoding rows, copied on the
 * GPU in queue order: their progress is what the steps recorded so far leave, so a
 * batch can shrink while a chunk of steps the host has not read back is still running.
 * `d` is left as it was (the caller disposes it).
 */
export function takeDecodeRows(d: DecodeRows, rows: readonly number[]): DecodeRows {
  if (rows.length === 0) throw new ShapeError('takeDecodeRows: no rows');
  return {
    count: rows.length, vocab: d.vocab, topStride: d.topStride, slots: d.slots,
    state: keep(takeRows(d.state, rows)),
    // The rows index the stop list where they were made, so it is kept whole.
    stops: keep(clone(d.stops)),
    ids: keep(takeRows(d.ids, rows)),
    positions: keep(takeRows(d.positions, rows)),
    record: keep(empty([d.slots, 3 + 2 * d.topStride, rows.length], 'u32')),
  };
}

/**
 * Marks rows `rows` of `d` done from the next step recorded on: the host ended them
 * (a stop string) where the GPU could not see it.
 */
export function finishDecodeRows(d: DecodeRows, rows: readonly number[]): void {
  const rt = d.state.storage.rt;
  for (const b of rows) {
    if (!Number.isInteger(b) || b < 0 || b >= d.count) throw new RangeError(`finishDecodeRows: row ${b} is not in [0, ${d.count})`);
    rt.upload(d.state.buffer, b * sk.DECODE_ROW_BYTES + 4 * sk.DONE_WORD, Uint32Array.of(1));
  }
}

export function disposeDecodeRows(d: DecodeRows): void {
  for (const t of [d.state, d.stops, d.ids, d.positions, d.record]) t.dispose();
}

/**
 * One step of the loop: every row of `logits` [rows, vocab] that is not done samples
 * its next token (the uniform of its seed and count, as util/random.ts uniformAt),
 * writes it to step `slot` of the record and to `rows.ids`, counts it, and is done
 * once it sampled a stop id or its maxTokens-th token. Done rows write nothing but
 * their next position, which every row advances.
 */
export function sampleStep(logits: Tensor, rows: DecodeRows, slot: number): void {
  const op = 'sampleStep';
  expectDType(op, 'logits', logits.dtype, 'f32');
  if (logits.rank !== 2 || logits.shape[0] !== rows.count || logits.shape[1] !== rows.vocab) {
    throw new ShapeError(`${op}: logits ${fmt(logits.shape)} are not [${rows.count}, ${rows.vocab}]`);
  }
  if (!Number.isInteger(slot) || slot < 0 || slot >= rows.slots) throw new RangeError(`${op}: slot ${slot} is not in [0, ${rows.slots})`);
  sk.sampleStep(logits.storage.rt, logits.buffer, rows.state.buffer, rows.record.buffer, rows.stops.buffer, rows.ids.buffer, rows.positions.buffer, {
    rows: rows.count, vocab: rows.vocab, topStride: rows.topStride, slot,
  });
}

/**
 * The first `steps` slots of the record, in one readback. A row's entries in a slot
 * are meaningful only if it was not done before that step (done rows write nothing).
 * The copy out of the record is recorded and submitted by the call itself, so the
 * steps recorded after it may write the record again while the readback is awaited.
 */
export async function readSteps(rows: DecodeRows, steps: number): Promise<SampledTokens[]> {
  if (!Number.isInteger(steps) || steps < 1 || steps > rows.slots) throw new RangeError(`readSteps: steps ${steps} is not in [1, ${rows.slots}]`);
  const words = sk.stepWords(rows.count, rows.topStride);
  const rec = rows.record;
  const bytes = await rec.storage.rt.read(rec.buffer, 0, 4 * words * steps);
  return Array.from({ length: steps }, (_, j) => sampledView(bytes, 4 * words * j, rows.count, rows.topStride));
}

/** `sampleTokens` and `readSampled` in one: the tokens of one step on the host. */
export async function sampleNext(logits: Tensor, rows: readonly sk.RowSampling[]): Promise<SampledTokens> {
  const out = sampleTokens(logits, rows);
  try {
    return await readSampled(out);
  } finally {
    out.dispose();
  }
}

export interface TokenRankOptions {
  /** Softmax temperature T: log-probs of softmax(logits / T). Default 1. */
  temperature?: number;
  /** Bytes of logits per block of rows (default 64 MiB). */
  blockBytes?: number;
}

/**
 * Log-prob under softmax(hidden @ weight^T / T) and rank (1 + the number of larger
 * logits) of targets[i] for each row i of hidden [N, H], weight [V, H] (the LM head).
 * The logits are made a block of rows at a time, since the rank needs whole rows.
 * Result u32 [2, N]: log-prob bits, then ranks (`readTokenRanks`).
 */
export function tokenRanks(hidden: Tensor, weight: Tensor, targets: Targets, opts: TokenRankOptions = {}): Tensor {
  const op = 'tokenRanks';
  checkHeadInputs(op, hidden, weight);
  const [n, h] = hidden.shape;
  const vocab = weight.shape[0];
  const rt = hidden.storage.rt;
  const invT = inverseTemperature(op, opts.temperature);
  const ids = targetIds(op, targets, n, vocab, rt);
  const out = empty([2, n], 'u32', rt);
  if (n === 0) return out;
  const budget = Math.min(opts.blockBytes ?? 64 * 2 ** 20, rt.gpu.limits.maxStorageBufferBindingSize);
  const block = Math.max(1, Math.min(n, Math.floor(budget / (4 * vocab))));
  const logits = empty([block, vocab], 'f32', rt);
  for (let r0 = 0; r0 < n; r0 += block) {
    const rows = Math.min(block, n - r0);
    forwardMatmul(rt, { a: hidden.buffer, b: weight.buffer, out: logits.buffer, m: rows, n: vocab, k: h, transB: true, offsetA: r0 * h });
    sk.tokenStats(rt, logits.buffer, ids.buffer, out.buffer, { rows, vocab, row0: r0, total: n, invT });
  }
  logits.dispose();
  if (ids !== targets) ids.dispose();
  return out;
}

/** Reads `tokenRanks`' result back (the caller still owns and disposes it). */
export async function readTokenRanks(ranked: Tensor): Promise<{ logprobs: Float32Array; ranks: Uint32Array }> {
  const n = ranked.shape[1];
  const bytes = n === 0 ? new ArrayBuffer(0) : ((await ranked.toArray()).buffer as ArrayBuffer);
  return { logprobs: new Float32Array(bytes, 0, n), ranks: new Uint32Array(bytes, 4 * n, n) };
}
