// The attention tests' cases: shapes, padding and masking of one call, its random
// inputs, and the CPU reference's view of it.

import type { AttentionRefDims } from '../../src/reference/attention.ts';
import { randn } from '../../src/util/random.ts';

export interface AttentionCase {
  b: number;
  hq: number;
  hkv: number;
  tq: number;
  /** Visible keys (default tq). */
  s?: number;
  /** Keys stored per head (default s). */
  sCap?: number;
  hd: number;
  pad?: number[];
  causal?: boolean;
  scale?: number;
}

/** q, k, v from `seed` on; q and k times `qkScale`, to give the softmax larger scores. */
export function attentionInputs(c: AttentionCase, seed: number, qkScale = 1) {
  const sCap = c.sCap ?? c.s ?? c.tq;
  return {
    sCap,
    q: randn(c.b * c.hq * c.tq * c.hd, seed, qkScale),
    k: randn(c.b * c.hkv * sCap * c.hd, seed + 1, qkScale),
    v: randn(c.b * c.hkv * sCap * c.hd, seed + 2),
  };
}

export function attentionRefDims(c: AttentionCase, sCap: number): AttentionRefDims {
  return { b: c.b, hq: c.hq, hkv: c.hkv, tq: c.tq, s: c.s, sCap, hd: c.hd, scale: c.scale, causal: c.causal, padLeft: c.pad };
}
