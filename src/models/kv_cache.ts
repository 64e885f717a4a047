// Keys and values of past tokens per layer, [batch, kvHeads, capacity, headDim],
// allocated once for the whole generation. Left padding is fixed at creation: rows of
// a batch are padded on the left to a common prompt length.

import type { ModelConfig } from '../hf_model/config.ts';
import { takeRows } from '../tensor/ops/create.ts';
import { keep } from '../tensor/scope.ts';
import { zeros, type Tensor } from '../tensor/tensor.ts';

export class KVCache {
  length = 0;

  private constructor(
    readonly batch: number,
    readonly capacity: number,
    readonly keys: Tensor[],
    readonly values: Tensor[],
    readonly padLeft: Int32Array | undefined,
  ) {}

  static create(cfg: ModelConfig, batch: number, capacity: number, padLeft?: Int32Array): KVCache {
    const shape = [batch, cfg.kvHeads, capacity, cfg.headDim];
    const make = () => Array.from({ length: cfg.layers }, () => keep(zeros(shape)));
    return new KVCache(batch, capacity, make(), make(), padLeft);
  }

  takeRows(rows: readonly number[]): KVCache {
    const take = (ts: Tensor[]) => ts.map((t) => keep(takeRows(t, rows)));
    const cache = new KVCache(rows.length, this.capacity, take(this.keys), take(this.values), this.padLeft && Int32Array.from(rows, (r) => this.padLeft![r]));
    cache.length = this.length;
    return cache;
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t.dispose();
  }
}
