// Counter-based uniforms for sampling: the draw of a request's t-th token is a hash of
// (seed, t), so a seed gives the same tokens whatever else shares the batch and
// however a request list is split.

// Chris Wellons' lowbias32 finalizer: every input bit affects every output bit.
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

function hash3(a: number, b: number, c: number): number {
  return mix32(mix32(mix32(a ^ 0x9e3779b9) ^ b) + Math.imul(c, 0x85ebca6b));
}

// Safe integers (negative ones too) as two 32-bit words.
function words(seed: number): [number, number] {
  return [seed >>> 0, Math.floor(seed / 2 ** 32) >>> 0];
}

/** The uniform in [0, 1) for token `step` of a request seeded with `seed`: 24 bits, exact in f32. */
export function uniformAt(seed: number, step: number): number {
  const [lo, hi] = words(seed);
  return (hash3(lo, hi, step) >>> 8) / 2 ** 24;
}

/** The seed of sample `index` of a request asked for several (index 0 keeps the seed). */
export function deriveSeed(seed: number, index: number): number {
  if (index === 0) return seed;
  const [lo, hi] = words(seed);
  return hash3(lo ^ 0x5bd1e995, hi, index) * 2 ** 21 + (hash3(hi, lo, index) >>> 11);
}

/** A fresh seed for requests that bring none. */
export function randomSeed(): number {
  const w = new Uint32Array(2);
  crypto.getRandomValues(w);
  return w[0] * 2 ** 21 + (w[1] >>> 11);
}
