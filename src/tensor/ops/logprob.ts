// Token log-probs (and entropies) of softmax(logits / T) at given target ids, fused so
// that the [tokens x vocab] log-probs are never materialised: from logits directly,
// or from hidden states and the LM head one vocabulary chunk at a time.

import * as lk from '../../kernels/logprob.ts';
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
