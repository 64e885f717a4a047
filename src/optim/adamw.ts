// AdamW with PyTorch's semantics (decoupled weight decay, bias-corrected moments), one
// fused kernel per parameter tensor. The moments live on the GPU outside every scope;
// stateDict/loadStateDict move them to and from named host arrays for checkpoints.

import * as ak from '../kernels/adamw.ts';
import { DTypeError, ShapeError } from '../tensor/errors.ts';
import { keep } from '../tensor/scope.ts';
import { fmt, sameShape } from '../tensor/shape.ts';
import { zeros, type Tensor } from '../tensor/tensor.ts';

export interface AdamWOptions {
  lr: number;
  betas?: readonly [number, number];
  eps?: number;
  weightDecay?: number;
}

export class AdamW {
  readonly params: readonly Tensor[];
  readonly betas: readonly [number, number];
  readonly eps: number;
  readonly weightDecay: number;
  /** First and second moments (exp_avg, exp_avg_sq), one per parameter. */
  readonly m: readonly Tensor[];
  readonly v: readonly Tensor[];
  /** Steps taken; the next step's bias correction uses stepCount + 1. */
  stepCount = 0;
  private _lr: number;

  constructor(params: readonly Tensor[], { lr, betas = [0.9, 0.999], eps = 1e-8, weightDecay = 0.01 }: AdamWOptions) {
    checkHyper(lr, betas, eps, weightDecay);
    const seen = new Set<Tensor>();
    params.forEach((p, i) => {
      if (p.dtype !== 'f32') throw new DTypeError(`AdamW: parameter ${label(p, i)} ${fmt(p.shape)} has dtype ${p.dtype}, expected f32`);
      if (!p.requiresGrad) throw new Error(`AdamW: parameter ${label(p, i)} ${fmt(p.shape)} does not require grad`);
      if (seen.has(p)) throw new Error(`AdamW: parameter ${label(p, i)} is listed twice`);
      seen.add(p);
    });
    this.params = [...params];
    this.betas = [betas[0], betas[1]];
    this.eps = eps;
    this.weightDecay = weightDecay;
    this._lr = lr;
    this.m = this.params.map((p) => keep(zeros(p.shape, 'f32', p.storage.rt)));
    this.v = this.params.map((p) => keep(zeros(p.shape, 'f32', p.storage.rt)));
  }

  get lr(): number {
    return this._lr;
  }

  setLr(lr: number): void {
    checkHyper(lr, this.betas, this.eps, this.weightDecay);
    this._lr = lr;
  }

  /**
   * One update of every parameter that has a gradient (others, and their moments, are
   * left alone). `lrOverride` applies to this step only; `gradScale` multiplies the
   * gradients as they are read (the factor clipGradNorm returns). Records dispatches
   * only: nothing is read back.
   */
  step(lrOverride?: number, gradScale = 1): void {
    const lr = lrOverride ?? this._lr;
    checkHyper(lr, this.betas, this.eps, this.weightDecay);
    if (!(Number.isFinite(gradScale) && gradScale >= 0)) throw new RangeError(`AdamW.step: gradScale must be finite and >= 0, got ${gradScale}`);
    this.params.forEach((p, i) => {
      if (p.grad && !sameShape(p.grad.shape, p.shape)) {
        throw new ShapeError(`AdamW.step: gradient ${fmt(p.grad.shape)} does not match parameter ${label(p, i)} ${fmt(p.shape)}`);
      }
    });
    this.stepCount++;
    const uniforms = ak.stepParams({
      lr, beta1: this.betas[0], beta2: this.betas[1], eps: this.eps, weightDecay: this.weightDecay, step: this.stepCount, gradScale,
    });
    this.params.forEach((p, i) => {
      if (p.grad) ak.step(p.storage.rt, uniforms, p.buffer, p.grad.buffer, this.m[i].buffer, this.v[i].buffer, p.size);
    });
  }

  /** Checkpoint keys: `<name>.exp_avg`, `<name>.exp_avg_sq` per parameter, and `step`. */
  private keys(): string[] {
    const keys = this.params.map((p, i) => p.name ?? `param.${i}`);
    const dup = keys.find((k, i) => keys.indexOf(k) !== i);
    if (dup !== undefined) throw new Error(`AdamW: two parameters are both named "${dup}"; optimizer state needs unique names`);
    return keys;
  }

  async stateDict(): Promise<Record<string, Float32Array>> {
    const keys = this.keys();
    const out: Record<string, Float32Array> = { step: Float32Array.of(this.stepCount) };
    for (let i = 0; i < keys.length; i++) {
      out[`${keys[i]}.exp_avg`] = Float32Array.from(await this.m[i].toArray());
      out[`${keys[i]}.exp_avg_sq`] = Float32Array.from(await this.v[i].toArray());
    }
    return out;
  }

  /** Replaces the moments and step count; checks every entry before changing anything. */
  loadStateDict(state: Readonly<Record<string, Float32Array>>): void {
    const keys = this.keys();
    const expected = new Set(['step', ...keys.flatMap((k) => [`${k}.exp_avg`, `${k}.exp_avg_sq`])]);
    const missing = [...expected].filter((k) => !(k in state));
    if (missing.length) throw new Error(`AdamW.loadStateDict: missing ${missing.map((k) => `"${k}"`).join(', ')}`);
    const unexpected = Object.keys(state).filter((k) => !expected.has(k));
    if (unexpected.length) throw new Error(`AdamW.loadStateDict: unexpected ${unexpected.map((k) => `"${k}"`).join(', ')}`);
    const step = state.step;
    if (step.length !== 1 || !Number.isInteger(step[0]) || step[0] < 0) {
      throw new Error(`AdamW.loadStateDict: "step" must hold one non-negative integer, got [${[...step.subarray(0, 4)].join(', ')}${step.length > 4 ? ', ...' : ''}]`);
    }
    this.params.forEach((p, i) => {
      for (const k of [`${keys[i]}.exp_avg`, `${keys[i]}.exp_avg_sq`]) {
        if (state[k].length !== p.size) {
          throw new ShapeError(`AdamW.loadStateDict: "${k}" has ${state[k].length} values, parameter ${fmt(p.shape)} has ${p.size}`);
        }
      }
    });
    this.params.forEach((p, i) => {
      const rt = p.storage.rt;
      rt.upload(this.m[i].buffer, 0, state[`${keys[i]}.exp_avg`]);
      rt.upload(this.v[i].buffer, 0, state[`${keys[i]}.exp_avg_sq`]);
    });
    this.stepCount = step[0];
  }

  /** Frees the moments (the parameters belong to the caller). */
  dispose(): void {
    for (const t of [...this.m, ...this.v]) t.dispose();
  }
}

function label(p: Tensor, i: number): string {
  return p.name ? `"${p.name}"` : `#${i}`;
}

function checkHyper(lr: number, betas: readonly [number, number], eps: number, weightDecay: number): void {
  if (!(Number.isFinite(lr) && lr >= 0)) throw new RangeError(`AdamW: lr must be finite and >= 0, got ${lr}`);
  for (const b of betas) if (!(b >= 0 && b < 1)) throw new RangeError(`AdamW: betas must lie in [0, 1), got [${betas.join(', ')}]`);
  if (!(eps >= 0)) throw new RangeError(`AdamW: eps must be >= 0, got ${eps}`);
  if (!(Number.isFinite(weightDecay) && weightDecay >= 0)) throw new RangeError(`AdamW: weightDecay must be finite and >= 0, got ${weightDecay}`);
}
