// Each decoder layer's weights packed into one buffer, for the whole-layer decode
// kernel (shaders/row_layer.wgsl), which can bind only a handful of buffers. Like the
// f16 decode copies (half_weights.ts), the f32 parameters stay the masters that
// training updates: the rollout engine packs these from them for each generation and
// frees them after it, so a rollout always reads the latest update.

import type { CausalLM } from './causal_lm.ts';
import type { LayerPack } from './token_batch.ts';
import type { RowLayerOffsets } from '../kernels/row_layer.ts';
import { keep } from '../tensor/scope.ts';
import { empty, type Tensor } from '../tensor/tensor.ts';

const align4 = (n: number) => Math.ceil(n / 4) * 4;

export class LayerPacks {
  private constructor(readonly layers: readonly LayerPack[]) {}

  /** Every layer of `model` packed from its parameters now. */
  static of(model: CausalLM): LayerPacks {
    const cfg = model.config;
    const rt = model.lmHead().storage.rt;
    const layers: LayerPack[] = [];
    for (let l = 0; l < cfg.layers; l++) {
      const pre = `${cfg.weightPrefix}layers.${l}.`;
      const parts: [offset: number, t: Tensor][] = [];
      let size = 0;
      // Consecutive names land back to back (q, k, v weights; their biases); each group starts at a multiple of 4.
      const group = (...names: string[]): number => {
        const start = (size = align4(size));
        for (const name of names) {
          const t = model.param(pre + name);
          parts.push([size, t]);
          size += t.size;
        }
        return start;
      };
      const at: RowLayerOffsets = {
        inNorm: group('input_layernorm.weight'),
        wqkv: group('self_attn.q_proj.weight', 'self_attn.k_proj.weight', 'self_attn.v_proj.weight'),
        bqkv: cfg.attentionBias ? group('self_attn.q_proj.bias', 'self_attn.k_proj.bias', 'self_attn.v_proj.bias') : null,
        wo: group('self_attn.o_proj.weight'),
        postNorm: group('post_attention_layernorm.weight'),
        wg: group('mlp.gate_proj.weight'),
        wu: group('mlp.up_proj.weight'),
        wd: group('mlp.down_proj.weight'),
      };
      const packed = keep(empty([align4(size)], 'f32', rt));
      for (const [offset, t] of parts) rt.copy(t.buffer, 0, packed.buffer, offset * 4, t.bytes);
      layers.push({ packed, at });
    }
    return new LayerPacks(layers);
  }

  /** Bytes the packs hold. */
  get bytes(): number {
    return this.layers.reduce((n, l) => n + l.packed.bytes, 0);
  }

  dispose(): void {
    for (const l of this.layers) l.packed.dispose();
  }
}
