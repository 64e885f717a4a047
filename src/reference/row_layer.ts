// CPU reference of shaders/row_layer.wgsl: one Qwen2 decoder layer of a decode step
// for every row, from the layer's weights by name, on the caches as the kernel reads
// and writes them (f64 math within each product).

import { invFreq } from './rope.ts';
import { rmsNormForward } from './rmsnorm.ts';
import { swigluForward } from './swiglu.ts';

export interface RowLayerRef {
  b: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  capacity: number;
  offset: number;
  eps: number;
  theta: number;
  /** Hugging Face names within the layer (input_layernorm.weight, self_attn.q_proj.weight, ...), biases optional. */
  weights: ReadonlyMap<string, Float32Array>;
  x: Float32Array;
  keys: Float32Array;
  values: Float32Array;
  positions: ArrayLike<number>;
  pad: ArrayLike<number>;
}

/** out = W x (+ bias) for W [n, k]. */
function linear(x: Float32Array, w: Float32Array, n: number, bias?: Float32Array): Float32Array {
  const k = x.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let s = bias ? bias[i] : 0;
    for (let j = 0; j < k; j++) s += w[i * k + j] * x[j];
    out[i] = s;
  }
  return out;
}

/** The layer's outputs [b, hidden]; the caches given are updated at `offset` as the kernel does. */
export function rowLayerForward(r: RowLayerRef): Float32Array {
  const { hidden: h, heads, kvHeads, headDim: hd, intermediate, capacity: cap, offset } = r;
  const w = (name: string) => {
    const t = r.weights.get(name);
    if (!t) throw new Error(`rowLayerForward: no weight ${name}`);
    return t;
  };
  const freq = invFreq(r.theta, hd);
  const half = hd / 2;
  const out = new Float32Array(r.b * h);
  for (let row = 0; row < r.b; row++) {
    const x = r.x.slice(row * h, (row + 1) * h);
    const xn = rmsNormForward(x, w('input_layernorm.weight'), r.eps);
    const proj = (p: 'q' | 'k' | 'v', n: number) => linear(xn, w(`self_attn.${p}_proj.weight`), n, r.weights.get(`self_attn.${p}_proj.bias`));
    const q = proj('q', heads * hd);
    const k = proj('k', kvHeads * hd);
    const v = proj('v', kvHeads * hd);
    const rotate = (t: Float32Array, n: number) => {
      for (let head = 0; head < n; head++) {
        for (let i = 0; i < half; i++) {
          const a = Math.fround(r.positions[row] * freq[i]);
          const [c, s] = [Math.cos(a), Math.sin(a)];
          const x1 = t[head * hd + i];
          const x2 = t[head * hd + i + half];
          t[head * hd + i] = x1 * c - x2 * s;
          t[head * hd + i + half] = x2 * c + x1 * s;
        }
      }
    };
    rotate(q, heads);
    rotate(k, kvHeads);
    for (let kh = 0; kh < kvHeads; kh++) {
      const at = ((row * kvHeads + kh) * cap + offset) * hd;
      r.keys.set(k.subarray(kh * hd, (kh + 1) * hd), at);
      r.values.set(v.subarray(kh * hd, (kh + 1) * hd), at);
    }
    const att = new Float32Array(heads * hd);
    for (let head = 0; head < heads; head++) {
      const kv = (row * kvHeads + Math.floor(head / (heads / kvHeads))) * cap;
      const scores: number[] = [];
      for (let j = r.pad[row]; j <= offset; j++) {
        let s = 0;
        for (let d = 0; d < hd; d++) s += q[head * hd + d] * r.keys[(kv + j) * hd + d];
        scores.push(s / Math.sqrt(hd));
      }
      const m = Math.max(...scores);
      const e = scores.map((s) => Math.exp(s - m));
      const sum = e.reduce((a, b) => a + b, 0);
      for (let d = 0; d < hd; d++) {
        let o = 0;
        e.forEach((p, i) => (o += p * r.values[(kv + r.pad[row] + i) * hd + d]));
        att[head * hd + d] = o / sum;
      }
    }
    const o = linear(att, w('self_attn.o_proj.weight'), h);
    const mid = x.map((v, i) => v + o[i]);
    const mn = rmsNormForward(mid, w('post_attention_layernorm.weight'), r.eps);
    const act = swigluForward(linear(mn, w('mlp.gate_proj.weight'), intermediate), linear(mn, w('mlp.up_proj.weight'), intermediate));
    const down = linear(act, w('mlp.down_proj.weight'), h);
    out.set(mid.map((v, i) => v + down[i]), row * h);
  }
  return out;
}
