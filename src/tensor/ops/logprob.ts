// Token log-probs (and entropies) of softmax(logits / T) at given target ids, fused so
// that the [tokens x vocab] log-probs are never materialised: from logits directly,
// or from hidden states and the LM head one vocabulary chunk at a time.

import * as lk from '../../kernels/logprob.ts';
import { forwardMatmul, gradientMatmuls } from '../../kernels/matmul/precision.ts';
import type { Runtime } from '../../gpu/runtime.ts';
import { record } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, tensor, zeros, type Tensor } from '../tensor.ts';

export interface LogprobOptions {
  /** Softmax temperature T: log-probs of softmax(logits / T). Default 1. */
  temperature?: number;
  /** Also return the entropy of each row's distribution. Default false. */
  withEntropy?: boolean;
}

export interface ChunkedLogprobOptions extends LogprobOptions {
  /** Vocabulary rows of the LM head per chunk; by default sized from memory. */
  chunk?: number;
}

export interface TokenLogprobs {
  /** [N]: log p(target) per token. */
  logprobs: Tensor;
  /** [N]: entropy of each token's distribution (withEntropy only). */
  entropy?: Tensor;
}

/**
 * Target ids, one per token. Host arrays are range-checked here; ids in a GPU tensor
 * cannot be checked without a readback, and an id outside [0, vocab) yields a NaN
 * log-prob instead.
 */
export type Targets = Tensor | Int32Array | readonly number[];

/** The targets as an i32 tensor of n ids, validated against the vocabulary when on the host. */
export function targetIds(op: string, targets: Targets, n: number, vocab: number, rt: Runtime): Tensor {
  if ('isTensor' in targets) {
    expectDType(op, 'targets', targets.dtype, 'i32');
    if (targets.rank !== 1 || targets.size !== n) throw new ShapeError(`${op}: targets ${fmt(targets.shape)} do not match ${n} tokens`);
    return targets;
  }
  if (targets.length !== n) throw new ShapeError(`${op}: ${targets.length} targets do not match ${n} tokens`);
  for (let i = 0; i < n; i++) {
    const t = targets[i];
    if (!Number.isInteger(t) || t < 0 || t >= vocab) throw new RangeError(`${op}: target ${t} at position ${i} is outside the vocabulary [0, ${vocab})`);
  }
  return tensor(Int32Array.from(targets), [n], 'i32', rt);
}

/** Hidden states [tokens, hidden] and an LM head [vocab, hidden], both f32, or an error naming the op. */
export function checkHeadInputs(op: string, hidden: Tensor, weight: Tensor): void {
  expectDType(op, 'hidden', hidden.dtype, 'f32');
  expectDType(op, 'weight', weight.dtype, 'f32');
  if (hidden.rank !== 2 || weight.rank !== 2 || hidden.shape[1] !== weight.shape[1] || weight.shape[0] === 0) {
    throw new ShapeError(`${op}: hidden ${fmt(hidden.shape)} and weight ${fmt(weight.shape)} are not [tokens, hidden] and [vocab, hidden]`);
  }
}

export function inverseTemperature(op: string, temperature = 1): number {
  if (!(temperature > 0) || !Number.isFinite(temperature)) throw new RangeError(`${op}: temperature must be a positive finite number, got ${temperature}`);
  return 1 / temperature;
}

// One output row of the fused [2, N] (log-probs, entropies) result, as its own tensor
// whose gradient lands in that row.
function outputRow(op: string, fused: Tensor, k: number): Tensor {
  const n = fused.shape[1];
  const rt = fused.storage.rt;
  const row = empty([n], 'f32', rt);
  rt.copy(fused.buffer, k * n * 4, row.buffer, 0, n * 4);
  return record(row, op, [fused], (g) => {
    const full = zeros(fused.shape, 'f32', rt);
    rt.copy(g.buffer, 0, full.buffer, k * n * 4, n * 4);
    return [full];
  });
}

/** Splits the kernel's output ([N] or [2, N] with entropies) into the result. */
export function splitOutputs(op: string, fused: Tensor, withEntropy: boolean): TokenLogprobs {
  if (!withEntropy) return { logprobs: fused };
  return { logprobs: outputRow(`${op}.logprobs`, fused, 0), entropy: outputRow(`${op}.entropy`, fused, 1) };
}

/**
 * Log-probs of `targets` under softmax(logits / T) for logits [N, V], in one kernel per
 * row (logsumexp, target log-prob and entropy together); differentiable w.r.t. logits.
 */
export function tokenLogprobsFromLogits(logits: Tensor, targets: Targets, options: LogprobOptions = {}): TokenLogprobs {
  const op = 'tokenLogprobsFromLogits';
  expectDType(op, 'logits', logits.dtype, 'f32');
  if (logits.rank !== 2 || logits.shape[1] === 0) throw new ShapeError(`${op}: logits ${fmt(logits.shape)} are not [tokens, vocab]`);
  const [n, vocab] = logits.shape;
  const rt = logits.storage.rt;
  const ids = targetIds(op, targets, n, vocab, rt);
  const entropy = options.withEntropy ?? false;
  const shape: lk.ChunkShape = { rows: n, width: vocab, col0: 0, invT: inverseTemperature(op, options.temperature), entropy };
  const state = empty([n, 4], 'f32', rt);
  const fused = empty(entropy ? [2, n] : [n], 'f32', rt);
  lk.logprobStats(rt, logits.buffer, ids.buffer, state.buffer, fused.buffer, shape, true, true);
  record(fused, op, [logits], (g) => {
    const dx = empty(logits.shape, 'f32', rt);
    lk.logprobGrad(rt, logits.buffer, ids.buffer, state.buffer, g.buffer, shape, dx.buffer);
    return [dx];
  });
  return splitOutputs(op, fused, entropy);
}

// The chunk's logits (and, in backward, their gradient) are the op's largest
// temporaries; this budget bounds each. H200, Qwen2.5-0.5B step at 4096 tokens: 128
// MiB (19 chunks) 229.7 ms and 20.14 GiB peak, 512 MiB (5) 224.5 ms and 20.68 GiB,
// 1280 MiB (2) 221.8 ms and 21.84 GiB; with tensor cores off 423.9 / 405.1 / 401.1 ms.
// Larger chunks fill more rounds of workgroups and take fewer dispatches; 512 MiB
// keeps most of that for a third of the memory.
const CHUNK_LOGITS_BYTES = 512 * 2 ** 20;

/**
 * The default chunk: vocabulary rows in as few chunks as fit the logits budget, the
 * chunks of equal width (a multiple of 128 where that still fits), since a short last
 * chunk runs its products on a fraction of the GPU.
 */
export function defaultChunk(rt: Runtime, tokens: number, hidden: number, vocab: number, budgetBytes = CHUNK_LOGITS_BYTES): number {
  const budget = Math.min(budgetBytes, rt.gpu.limits.maxStorageBufferBindingSize);
  const most = Math.max(1, Math.floor(budget / (4 * Math.max(tokens, hidden, 1))));
  if (most >= vocab) return vocab;
  const even = Math.ceil(vocab / Math.ceil(vocab / most));
  const rounded = Math.ceil(even / 128) * 128;
  return rounded <= most ? rounded : even;
}

interface Chunk {
  col0: number;
  width: number;
}

function vocabChunks(vocab: number, chunk: number): Chunk[] {
  const out: Chunk[] = [];
  for (let col0 = 0; col0 < vocab; col0 += chunk) out.push({ col0, width: Math.min(chunk, vocab - col0) });
  return out;
}

/**
 * Log-probs of `targets` under softmax(hidden @ weight^T / T) for hidden [N, H] and the
 * LM head weight [V, H], never holding more than [N, chunk] logits: each vocabulary
 * chunk's logits are merged into running per-token statistics, and backward
 * recomputes them chunk by chunk. Differentiable w.r.t. hidden and weight.
 */
export function tokenLogprobs(hidden: Tensor, weight: Tensor, targets: Targets, options: ChunkedLogprobOptions = {}): TokenLogprobs {
  const op = 'tokenLogprobs';
  checkHeadInputs(op, hidden, weight);
  const [n, h] = hidden.shape;
  const vocab = weight.shape[0];
  const rt = hidden.storage.rt;
  const chunk = options.chunk ?? defaultChunk(rt, n, h, vocab);
  if (!Number.isInteger(chunk) || chunk < 1) throw new RangeError(`${op}: chunk must be a positive integer, got ${chunk}`);
  const ids = targetIds(op, targets, n, vocab, rt);
  const entropy = options.withEntropy ?? false;
  const invT = inverseTemperature(op, options.temperature);
  const chunks = vocabChunks(vocab, chunk);
  const width = chunks[0].width;
  const shapeOf = (c: Chunk): lk.ChunkShape => ({ rows: n, width: c.width, col0: c.col0, invT, entropy });
  const state = empty([n, 4], 'f32', rt);
  const fused = empty(entropy ? [2, n] : [n], 'f32', rt);
  const logits = empty([n, width], 'f32', rt);
  // A chunk's rows of the LM head, and of its gradient, are used in place at offset
  // col0 * h.
  chunks.forEach((c, i) => {
    forwardMatmul(rt, { a: hidden.buffer, b: weight.buffer, offsetB: c.col0 * h, out: logits.buffer, m: n, n: c.width, k: h, transB: true });
    lk.logprobStats(rt, logits.buffer, ids.buffer, state.buffer, fused.buffer, shapeOf(c), i === 0, i === chunks.length - 1);
  });
  logits.dispose();
  record(fused, op, [hidden, weight], (g) => {
    const dHidden = hidden.requiresGrad ? empty(hidden.shape, 'f32', rt) : null;
    const dWeight = weight.requiresGrad ? empty(weight.shape, 'f32', rt) : null;
    const dlogits = empty([n, width], 'f32', rt);
    chunks.forEach((c, i) => {
      const offset = c.col0 * h;
      forwardMatmul(rt, { a: hidden.buffer, b: weight.buffer, offsetB: offset, out: dlogits.buffer, m: n, n: c.width, k: h, transB: true });
      lk.logprobGrad(rt, dlogits.buffer, ids.buffer, state.buffer, g.buffer, shapeOf(c));
      gradientMatmuls(rt, dlogits.buffer, n * c.width, [
        ...(dHidden ? [{ a: dlogits.buffer, b: weight.buffer, offsetB: offset, out: dHidden.buffer, m: n, n: h, k: c.width, accumulate: i > 0 }] : []),
        ...(dWeight ? [{ a: dlogits.buffer, b: hidden.buffer, out: dWeight.buffer, offsetC: offset, m: c.width, n: h, k: n, transA: true }] : []),
      ]);
    });
    dlogits.dispose();
    return [dHidden, dWeight];
  });
  return splitOutputs(op, fused, entropy);
}
