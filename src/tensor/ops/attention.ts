// Scaled dot-product attention (flash kernels): causal, grouped-query, left padding,
// and decoding against a KV cache.

import { attentionBackward, attentionForward, attentionTiles } from '../../kernels/attention.ts';
import type { AttentionDims } from '../../kernels/attention_params.ts';
import { attentionForwardTensor, forwardTakesTensorCores } from '../../kernels/attention_tensor.ts';
import { attentionBackwardTensor, backwardTakesTensorCores, trainingTakesTensorCores } from '../../kernels/attention_tensor_backward.ts';
import { record, recordsGradient } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

export interface AttentionOptions {
  /** [B] i32/u32: leading key positions of each batch row that are padding. */
  padLeft?: Tensor;
  /** Defaults to 1/sqrt(D). */
  scale?: number;
  /** Defaults to true. */
  causal?: boolean;
  /**
   * Visible key rows when k/v are a preallocated cache [B, Hkv, capacity, D]; defaults
   * to k.shape[2]. Query row i then sits at absolute position kvLen - Tq + i.
   */
  kvLen?: number;
}

function dimsOf(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions): AttentionDims {
  // Built only for an error: decode steps check hundreds of attention calls a second.
  const shapes = () => `q ${fmt(q.shape)}, k ${fmt(k.shape)}, v ${fmt(v.shape)}`;
  expectDType('attention', 'q', q.dtype, 'f32');
  expectDType('attention', 'k', k.dtype, 'f32');
  expectDType('attention', 'v', v.dtype, 'f32');
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4) throw new ShapeError(`attention: expected rank-4 [B, H, T, D] tensors, got ${shapes()}`);
  const [b, hq, tq, hd] = q.shape;
  const [kb, hkv, sCap, kd] = k.shape;
  if (v.shape.some((n, i) => n !== k.shape[i])) throw new ShapeError(`attention: k and v shapes differ: ${shapes()}`);
  if (kb !== b || kd !== hd) throw new ShapeError(`attention: batch or head dim of k/v does not match q: ${shapes()}`);
  if (hkv === 0 || hq % hkv !== 0) throw new ShapeError(`attention: ${hq} query heads are not a multiple of ${hkv} kv heads: ${shapes()}`);
  const s = opts.kvLen ?? sCap;
  if (!Number.isInteger(s) || s < 0 || s > sCap) throw new ShapeError(`attention: kvLen ${s} outside [0, ${sCap}]: ${shapes()}`);
  if (s < tq) throw new ShapeError(`attention: ${tq} query rows but only ${s} keys (queries sit at the last Tq key positions): ${shapes()}`);
  if (opts.padLeft) {
    expectDType('attention', 'padLeft', opts.padLeft.dtype, 'i32', 'u32');
    if (opts.padLeft.rank !== 1 || opts.padLeft.shape[0] !== b) throw new ShapeError(`attention: padLeft ${fmt(opts.padLeft.shape)} must be [${b}]: ${shapes()}`);
  }
  const limits = q.storage.rt.gpu.limits;
  if (!attentionTiles(limits, 'forward', hd, tq, s) || !attentionTiles(limits, 'backward', hd, tq, s)) {
    throw new ShapeError(`attention: head dim ${hd} does not fit ${limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory: ${shapes()}`);
  }
  return { b, hq, hkv, tq, s, sCap, hd, scale: opts.scale ?? 1 / Math.sqrt(hd), causal: opts.causal ?? true };
}

/**
 * softmax(scale * q k^T + mask) v for q [B, Hq, Tq, D], k/v [B, Hkv, S, D] -> [B, Hq, Tq, D].
 * Query head h attends with kv head h / (Hq / Hkv). Keys before padLeft[b], and keys
 * after the query's own position when causal, are masked; query rows inside the
 * padding come out as zeros (and get zero gradients). With k/v longer than q (a KV
 * cache) query row i sits at position S - Tq + i. The backward reads the row
 * log-sum-exp [B, Hq, Tq] saved here in the current scope, and padLeft: both must live
 * until it runs (a training step's forward and backward share one scope).
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const d = dimsOf(q, k, v, opts);
  const rt = q.storage.rt;
  const pad = opts.padLeft?.buffer ?? null;
  const o = empty([d.b, d.hq, d.tq, d.hd], 'f32', rt);
  const lse = empty([d.b, d.hq, d.tq], 'f32', rt);
  // A forward a backward follows, and one computed as such, picks its kernel by the
  // backward's: that backward recomputes the probabilities from the lse saved here.
  const asTraining = recordsGradient([q, k, v]) || rt.policy.attention.trainingForward;
  const onTensorCores = asTraining ? trainingTakesTensorCores(rt, d) : forwardTakesTensorCores(rt, d);
  if (onTensorCores) attentionForwardTensor(rt, d, q.buffer, k.buffer, v.buffer, pad, o.buffer, lse.buffer);
  else attentionForward(rt, d, q.buffer, k.buffer, v.buffer, pad, o.buffer, lse.buffer);
  const out = record(o, 'attention', [q, k, v], (g) => {
    const delta = empty([d.b, d.hq, d.tq], 'f32', rt);
    const dq = q.requiresGrad ? empty(q.shape, 'f32', rt) : null;
    const dk = k.requiresGrad ? empty(k.shape, 'f32', rt) : null;
    const dv = v.requiresGrad ? empty(v.shape, 'f32', rt) : null;
    const grads = { dq: dq?.buffer ?? null, dk: dk?.buffer ?? null, dv: dv?.buffer ?? null };
    const backward = backwardTakesTensorCores(rt, d) ? attentionBackwardTensor : attentionBackward;
    backward(rt, d, q.buffer, k.buffer, v.buffer, opts.padLeft?.buffer ?? null, o.buffer, g.buffer, lse.buffer, delta.buffer, grads);
    delta.dispose();
    return [dq, dk, dv];
  });
  if (!out.node) lse.dispose();
  return out;
}
