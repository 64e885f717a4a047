// Causal depthwise conv1d over time, channels last (Qwen3.5's short convolution on the
// fused q|k|v projection), with an optional fused SiLU, left padding, and a conv state
// for decoding token by token.

import * as ck from '../../kernels/conv1d.ts';
import { record, recordsGradient } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, type Tensor } from '../tensor.ts';

export interface CausalConv1dOptions {
  /** Apply SiLU to the convolution (transformers' activation="silu"). */
  silu?: boolean;
  /** [B] i32: positions before padLeft[b] (absolute, see `offset`) read as zeros. */
  padLeft?: Tensor;
  /** Absolute position of x's first token: the tokens already in `state`. */
  offset?: number;
  /**
   * [B, K-1, C]: the last K-1 inputs before x (zeros for a fresh sequence). It feeds the
   * first outputs and is then advanced in place to end at x's last token. Cached
   * inference only: no gradient flows through a stateful call.
   */
  state?: Tensor;
}

/**
 * y[b, t, c] = act(sum_j w[c, j] x[b, t - (K-1) + j, c]) for x [B, T, C] and weight
 * [C, K] or [C, 1, K] (PyTorch's depthwise Conv1d layout); inputs before t = 0 are the
 * state or zeros.
 */
export function causalConv1d(x: Tensor, weight: Tensor, opts: CausalConv1dOptions = {}): Tensor {
  expectDType('causalConv1d', 'x', x.dtype, 'f32');
  expectDType('causalConv1d', 'weight', weight.dtype, 'f32');
  const shapes = `x ${fmt(x.shape)}, weight ${fmt(weight.shape)}`;
  if (x.rank !== 3) throw new ShapeError(`causalConv1d: x must be [B, T, C], got ${shapes}`);
  const [B, T, C] = x.shape;
  const depthwise = weight.rank === 2 || (weight.rank === 3 && weight.shape[1] === 1);
  if (!depthwise || weight.shape[0] !== C) throw new ShapeError(`causalConv1d: weight must be [C, K] or [C, 1, K] with C = ${C}: ${shapes}`);
  const K = weight.shape[weight.rank - 1];
  if (K < 1) throw new ShapeError(`causalConv1d: kernel width must be at least 1: ${shapes}`);
  const offset = opts.offset ?? 0;
  if (!Number.isInteger(offset) || offset < 0) throw new ShapeError(`causalConv1d: offset ${offset} must be a non-negative integer`);
  if (opts.padLeft) {
    expectDType('causalConv1d', 'padLeft', opts.padLeft.dtype, 'i32');
    if (opts.padLeft.rank !== 1 || opts.padLeft.shape[0] !== B) throw new ShapeError(`causalConv1d: padLeft ${fmt(opts.padLeft.shape)} must be [${B}]: ${shapes}`);
  }
  const state = opts.state;
  if (state) {
    expectDType('causalConv1d', 'state', state.dtype, 'f32');
    if (state.rank !== 3 || state.shape[0] !== B || state.shape[1] !== K - 1 || state.shape[2] !== C) {
      throw new ShapeError(`causalConv1d: state ${fmt(state.shape)} must be [${B}, ${K - 1}, ${C}]: ${shapes}`);
    }
    if (recordsGradient([x, weight])) {
      throw new ShapeError('causalConv1d: a call with a conv state is for cached inference; run it under noGrad');
    }
  }
  const rt = x.storage.rt;
  const d: ck.Conv1dDims = { b: B, t: T, c: C, k: K, silu: opts.silu ?? false, offset };
  const pad = opts.padLeft?.buffer ?? null;
  const y = empty(x.shape, 'f32', rt);
  ck.forward(rt, d, x.buffer, weight.buffer, state?.buffer ?? null, pad, y.buffer);
  if (state) {
    ck.stateUpdate(rt, d, x.buffer, pad, state.buffer);
    return y;
  }
  return record(y, 'causalConv1d', [x, weight], (g) => {
    const dpre = empty(x.shape, 'f32', rt);
    const dx = x.requiresGrad ? empty(x.shape, 'f32', rt) : null;
    const dw = weight.requiresGrad ? empty(weight.shape, 'f32', rt) : null;
    const blocks = ck.dwBlocks(d);
    const partial = dw && blocks > 1 ? empty([blocks, C, K], 'f32', rt) : null;
    ck.backward(rt, d, x.buffer, weight.buffer, opts.padLeft?.buffer ?? null, g.buffer, dpre.buffer, dx?.buffer ?? null, dw?.buffer ?? null, partial?.buffer ?? null);
    dpre.dispose();
    partial?.dispose();
    return [dx, dw];
  });
}
