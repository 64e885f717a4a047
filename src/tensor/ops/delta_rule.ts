// The gated delta rule (Gated DeltaNet's token mixer, Qwen3.5's linear attention):
// chunked kernels for training and prefill, the plain recurrence for decoding.

import * as dk from '../../kernels/delta_rule.ts';
import { record, recordsGradient } from '../autograd.ts';
import { expectDType } from '../dtype.ts';
import { ShapeError } from '../errors.ts';
import { fmt } from '../shape.ts';
import { empty, zeros, type Tensor } from '../tensor.ts';

export interface GatedDeltaRuleOptions {
  /** Query scale; defaults to 1/sqrt(Dk). */
  scale?: number;
  /** [B] i32: positions before padLeft[b] (absolute, see `offset`) are skipped. */
  padLeft?: Tensor;
  /** Absolute position of the first token: the tokens already folded into `state`. */
  offset?: number;
  /**
   * [B, Hv, Dk, Dv]: the state before the first token, advanced in place to the state
   * after the last. Cached inference only: no gradient flows through a stateful call.
   */
  state?: Tensor;
  /** Chunk length of the chunked kernels (1..64, default 64). */
  chunk?: number;
  /** 'auto' decodes short stateful steps token by token and chunks everything else. */
  mode?: 'auto' | 'chunked' | 'recurrent';
}

/** Stateful calls at most this long run the recurrence in 'auto' mode. */
const RECURRENT_MAX_TOKENS = 8;

interface Checked {
  d: dk.DeltaRuleDims;
  tiles: dk.DeltaRuleTiles;
}

function check(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, o: GatedDeltaRuleOptions): Checked {
  const shapes = `q ${fmt(q.shape)}, k ${fmt(k.shape)}, v ${fmt(v.shape)}, g ${fmt(g.shape)}, beta ${fmt(beta.shape)}`;
  for (const [name, t] of [['q', q], ['k', k], ['v', v], ['g', g], ['beta', beta]] as const) expectDType('gatedDeltaRule', name, t.dtype, 'f32');
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4) throw new ShapeError(`gatedDeltaRule: q, k, v must be [B, T, H, D]: ${shapes}`);
  const [B, T, Hk, Dk] = q.shape;
  const [, , Hv, Dv] = v.shape;
  if (k.shape.some((n, i) => n !== q.shape[i])) throw new ShapeError(`gatedDeltaRule: q and k shapes differ: ${shapes}`);
  if (v.shape[0] !== B || v.shape[1] !== T) throw new ShapeError(`gatedDeltaRule: v's batch and time do not match q's: ${shapes}`);
  if (Hk === 0 || Hv % Hk !== 0) throw new ShapeError(`gatedDeltaRule: ${Hv} value heads are not a multiple of ${Hk} key heads: ${shapes}`);
  for (const t of [g, beta]) {
    if (t.rank !== 3 || t.shape[0] !== B || t.shape[1] !== T || t.shape[2] !== Hv) throw new ShapeError(`gatedDeltaRule: g and beta must be [${B}, ${T}, ${Hv}]: ${shapes}`);
  }
  const offset = o.offset ?? 0;
  if (!Number.isInteger(offset) || offset < 0) throw new ShapeError(`gatedDeltaRule: offset ${offset} must be a non-negative integer`);
  if (o.padLeft) {
    expectDType('gatedDeltaRule', 'padLeft', o.padLeft.dtype, 'i32');
    if (o.padLeft.rank !== 1 || o.padLeft.shape[0] !== B) throw new ShapeError(`gatedDeltaRule: padLeft ${fmt(o.padLeft.shape)} must be [${B}]: ${shapes}`);
  }
  if (o.state) {
    expectDType('gatedDeltaRule', 'state', o.state.dtype, 'f32');
    const want = [B, Hv, Dk, Dv];
    if (o.state.rank !== 4 || o.state.shape.some((n, i) => n !== want[i])) throw new ShapeError(`gatedDeltaRule: state ${fmt(o.state.shape)} must be ${fmt(want)}: ${shapes}`);
  }
  const chunk = o.chunk ?? dk.MAX_CHUNK;
  if (!Number.isInteger(chunk) || chunk < 1 || chunk > dk.MAX_CHUNK) throw new ShapeError(`gatedDeltaRule: chunk ${chunk} must be an integer in [1, ${dk.MAX_CHUNK}]`);
  const rt = q.storage.rt;
  const tiles = dk.deltaRuleTiles(rt.gpu.limits.maxComputeWorkgroupStorageSize, { t: T, dk: Dk, dv: Dv }, chunk);
  if (!tiles) throw new ShapeError(`gatedDeltaRule: head dim ${Dk} with chunk ${chunk} does not fit ${rt.gpu.limits.maxComputeWorkgroupStorageSize} bytes of workgroup memory: ${shapes}`);
  const scale = o.scale ?? 1 / Math.sqrt(Dk);
  return { d: { b: B, t: T, hk: Hk, hv: Hv, dk: Dk, dv: Dv, scale, offset }, tiles };
}

function allocate<S extends object>(sizes: Record<keyof S, number>): { tensors: Tensor[]; buffers: S } {
  const tensors: Tensor[] = [];
  const buffers = {} as Record<string, GPUBuffer>;
  for (const [name, n] of Object.entries(sizes) as [string, number][]) {
    const t = empty([n]);
    tensors.push(t);
    buffers[name] = t.buffer;
  }
  return { tensors, buffers: buffers as S };
}

/**
 * Gated delta rule over q, k [B, T, Hk, Dk], v [B, T, Hv, Dv], log-decays g and
 * write strengths beta [B, T, Hv], value head h reading key head h / (Hv / Hk):
 *   S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T (scale q_t)
 * from a zero state (or `state`); returns o [B, T, Hv, Dv]. Padding positions output
 * zeros and get zero gradients. g must be <= 0 (a decay) for the chunked form to stay
 * in range; Qwen3.5's g = -exp(A_log) softplus(a + dt_bias) is. The backward re-runs
 * the chunked forward and reads the inputs and padLeft, which must live until then.
 */
export function gatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, opts: GatedDeltaRuleOptions = {}): Tensor {
  const { d, tiles } = check(q, k, v, g, beta, opts);
  const inputs = [q, k, v, g, beta];
  const needsGrad = recordsGradient(inputs);
  if (opts.state && needsGrad) throw new ShapeError('gatedDeltaRule: a call with a state is for cached inference; run it under noGrad');
  const rt = q.storage.rt;
  const x: dk.DeltaRuleInputs = { q: q.buffer, k: k.buffer, v: v.buffer, g: g.buffer, beta: beta.buffer };
  const pad = opts.padLeft?.buffer ?? null;
  const out = empty(v.shape, 'f32', rt);
  const mode = opts.mode ?? 'auto';
  if (mode === 'recurrent' && needsGrad) throw new ShapeError('gatedDeltaRule: the recurrent form has no backward; use the chunked form for training');
  if (mode === 'recurrent' || (mode === 'auto' && opts.state && d.t <= RECURRENT_MAX_TOKENS)) {
    const state = opts.state ?? zeros([d.b, d.hv, d.dk, d.dv], 'f32', rt);
    dk.recurrent(rt, d, x, pad, state.buffer, out.buffer);
    if (!opts.state) state.dispose();
    return out;
  }
  const sizes = dk.scratchSizes(d, tiles);
  const fwd = allocate<dk.ForwardScratch>(sizes.forward);
  const state = opts.state ?? zeros([d.b, d.hv, d.dk, d.dv], 'f32', rt);
  dk.chunkForward(rt, d, tiles, x, pad, state.buffer, fwd.buffers, out.buffer);
  for (const t of fwd.tensors) t.dispose();
  if (!opts.state) state.dispose();
  return record(out, 'gatedDeltaRule', inputs, (gOut) => {
    const f = allocate<dk.ForwardScratch>(sizes.forward);
    const b = allocate<dk.BackwardScratch>(sizes.backward);
    const start = zeros([d.b, d.hv, d.dk, d.dv], 'f32', rt);
    dk.chunkForward(rt, d, tiles, x, opts.padLeft?.buffer ?? null, start.buffer, f.buffers, null);
    const grads = inputs.map((t) => empty(t.shape, 'f32', rt));
    const [dq, dkk, dv, dg, dbeta] = grads;
    dk.chunkBackward(rt, d, tiles, x, opts.padLeft?.buffer ?? null, f.buffers, gOut.buffer, b.buffers, {
      dq: dq.buffer, dk: dkk.buffer, dv: dv.buffer, dg: dg.buffer, dbeta: dbeta.buffer,
    });
    for (const t of [...f.tensors, ...b.tensors, start]) t.dispose();
    return grads.map((gr, i) => {
      if (inputs[i].requiresGrad) return gr;
      gr.dispose();
      return null;
    });
  });
}

/**
 * Gated DeltaNet's log-decay g = -exp(aLog) * softplus(a + dtBias) for a [..., H]
 * and per-head aLog, dtBias [H] (softplus as PyTorch's, threshold 20), fused.
 */
export function deltaDecay(a: Tensor, aLog: Tensor, dtBias: Tensor): Tensor {
  for (const [name, t] of [['a', a], ['aLog', aLog], ['dtBias', dtBias]] as const) expectDType('deltaDecay', name, t.dtype, 'f32');
  const h = a.shape[a.rank - 1];
  if (a.rank === 0 || aLog.rank !== 1 || dtBias.rank !== 1 || aLog.shape[0] !== h || dtBias.shape[0] !== h) {
    throw new ShapeError(`deltaDecay: aLog ${fmt(aLog.shape)} and dtBias ${fmt(dtBias.shape)} must be [H] for a ${fmt(a.shape)}`);
  }
  const rt = a.storage.rt;
  const rows = h === 0 ? 0 : a.size / h;
  const g = empty(a.shape, 'f32', rt);
  dk.decayGate(rt, a.buffer, aLog.buffer, dtBias.buffer, g.buffer, rows, h);
  return record(g, 'deltaDecay', [a, aLog, dtBias], (dg) => {
    const da = empty(a.shape, 'f32', rt);
    const perElement = empty(a.shape, 'f32', rt);
    const daLog = aLog.requiresGrad ? empty([h], 'f32', rt) : null;
    const dDt = dtBias.requiresGrad ? empty([h], 'f32', rt) : null;
    dk.decayGateGrad(rt, a.buffer, aLog.buffer, dtBias.buffer, dg.buffer, rows, h, da.buffer, perElement.buffer, daLog?.buffer ?? null, dDt?.buffer ?? null);
    perElement.dispose();
    if (a.requiresGrad) return [da, daLog, dDt];
    da.dispose();
    return [null, daLog, dDt];
  });
}
