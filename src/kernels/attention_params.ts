// What every attention launcher shares: the dimensions of a call and the uniform its
// kernels read (Params in shaders/common/attention_mask.wgsl).

import { uniforms } from './launch.ts';

export interface AttentionDims {
  b: number;
  hq: number;
  hkv: number;
  /** Query rows per head. */
  tq: number;
  /** Visible key rows per head (the cache length when decoding). */
  s: number;
  /** Key rows stored per head (>= s; a KV cache's capacity). */
  sCap: number;
  hd: number;
  scale: number;
  causal: boolean;
}

export type TileLimits = Pick<GPUSupportedLimits, 'maxComputeWorkgroupStorageSize' | 'maxComputeInvocationsPerWorkgroup' | 'maxComputeWorkgroupSizeX'>;

/** The uniform: `split` cuts each row's keys into parts for the decode kernel (whole by default). */
export function attentionParams(d: AttentionDims, hasPad: boolean, split: { parts: number; keys: number } = { parts: 1, keys: 0 }) {
  const p = uniforms(13);
  p.u[0] = d.tq;
  p.u[1] = d.s;
  p.u[2] = d.sCap;
  p.u[3] = d.s - d.tq;
  p.u[4] = d.hq;
  p.u[5] = d.hkv;
  p.u[6] = d.hq / d.hkv;
  p.u[7] = d.causal ? 1 : 0;
  p.u[8] = hasPad ? 1 : 0;
  p.u[9] = d.b * d.hq * d.tq;
  p.setF(10, d.scale);
  p.u[11] = split.parts;
  p.u[12] = split.keys;
  return p;
}

