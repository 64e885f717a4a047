// Inference state of Qwen3.5's hybrid decoder, allocated once per generation: keys and
// values [batch, kvHeads, capacity, headDim] for the full-attention layers, and for the
// linear-attention layers the conv state [batch, K-1, convDim] (the last K-1 inputs of
// the short convolution) and the delta-rule state [batch, Hv, Dk, Dv]. The recurrent
// parts have a fixed size whatever the length. Left padding is fixed at creation.

import type { ModelCache } from './causal_lm.ts';
import type { ModelConfig } from '../hf_model/config.ts';
import { ConfigError } from '../hf_model/errors.ts';
import { takeRows } from '../tensor/ops/create.ts';
import { keep } from '../tensor/scope.ts';
import { zeros, type Tensor } from '../tensor/tensor.ts';

export interface AttentionState {
  keys: Tensor;
  values: Tensor;
}

export interface LinearAttentionState {
  conv: Tensor;
  recurrent: Tensor;
}

export class RecurrentCache implements ModelCache {
  length = 0;

  private constructor(
    readonly batch: number,
    readonly capacity: number,
    /** Per layer: set for full-attention layers, null for linear ones. */
    readonly attention: (AttentionState | null)[],
    /** Per layer: set for linear-attention layers, null for full ones. */
    readonly linear: (LinearAttentionState | null)[],
    readonly padLeft: Int32Array | undefined,
  ) {}

  static create(cfg: ModelConfig, batch: number, capacity: number, padLeft?: Int32Array): RecurrentCache {
    const lin = cfg.linearAttention;
    const attention = cfg.layerTypes.map((kind) => {
      if (kind !== 'full_attention') return null;
      const shape = [batch, cfg.kvHeads, capacity, cfg.headDim];
      return { keys: keep(zeros(shape)), values: keep(zeros(shape)) };
    });
    const linear = cfg.layerTypes.map((kind) => {
      if (kind !== 'linear_attention') return null;
      if (!lin) throw new ConfigError(`${cfg.architecture}: linear_attention layers without linear attention settings`);
      const convDim = 2 * lin.numKeyHeads * lin.keyHeadDim + lin.numValueHeads * lin.valueHeadDim;
      return {
        conv: keep(zeros([batch, lin.convKernel - 1, convDim])),
        recurrent: keep(zeros([batch, lin.numValueHeads, lin.keyHeadDim, lin.valueHeadDim])),
      };
    });
    return new RecurrentCache(batch, capacity, attention, linear, padLeft);
  }

  takeRows(rows: readonly number[]): RecurrentCache {
    const take = (t: Tensor) => keep(takeRows(t, rows));
    const cache = new RecurrentCache(
      rows.length, this.capacity,
      this.attention.map((a) => a && { keys: take(a.keys), values: take(a.values) }),
      this.linear.map((l) => l && { conv: take(l.conv), recurrent: take(l.recurrent) }),
      this.padLeft && Int32Array.from(rows, (r) => this.padLeft![r]),
    );
    cache.length = this.length;
    return cache;
  }

  dispose(): void {
    for (const a of this.attention) {
      a?.keys.dispose();
      a?.values.dispose();
    }
    for (const l of this.linear) {
      l?.conv.dispose();
      l?.recurrent.dispose();
    }
  }
}
