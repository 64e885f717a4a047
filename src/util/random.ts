// Every random number in the project comes from here, and all of them are seeded and
// integer-exact, so the same seed gives the same numbers on Bun, Deno and Node:
// - mulberry32 streams: procedural worlds (Prng) and host-side samples for initial
//   weights, benchmarks and tests (randn, uniform);
// - counter-based uniforms for token sampling: the draw of a request's t-th token is a
//   hash of (seed, t), so a seed gives the same tokens whatever shares the batch;
// - the trainer's Rng, xoshiro128** (Blackman and Vigna), whose four words of state fit
//   in a checkpoint's JSON, so a resumed run draws what the uninterrupted one would.

/** A 32-bit avalanche hash (the murmur3 finalizer): nearby inputs give unrelated outputs. */
export function hash32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** FNV-1a of a string, to turn stream labels into seeds. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** A mulberry32 stream from its 32-bit state: uniforms in [0, 1). */
export function mulberry32(state: number): () => number {
  let a = state >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A generator for procedural environments: worlds are pure functions of their seed. */
export class Prng {
  private readonly draw: () => number;

  constructor(seed: number) {
    this.draw = mulberry32(hash32(seed));
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.draw();
  }

  /** Uniform integer in [lo, hi], both ends included. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('Prng.pick: empty list');
    return items[Math.floor(this.next() * items.length)];
  }

  /** A shuffled copy (Fisher-Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

/** `n` standard normal samples times `scale` (Box-Muller), from a mulberry32 stream seeded with `seed`. */
export function randn(n: number, seed: number, scale = 1): Float32Array {
  const r = mulberry32(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(r(), 1e-12);
    const v = r();
    out[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v) * scale;
  }
  return out;
}

/** `n` samples uniform in [lo, hi), from a mulberry32 stream seeded with `seed`. */
export function uniform(n: number, seed: number, lo = 0, hi = 1): Float32Array {
  const r = mulberry32(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * r();
  return out;
}

// Chris Wellons' lowbias32 finalizer: every input bit affects every output bit.
function lowbias32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

function hash3(a: number, b: number, c: number): number {
  return lowbias32(lowbias32(lowbias32(a ^ 0x9e3779b9) ^ b) + Math.imul(c, 0x85ebca6b));
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

export type RngState = [number, number, number, number];

const rotl = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;

/** The trainer's generator (xoshiro128**): task sampling, engine seeds, shuffles; its state checkpoints. */
export class Rng {
  private s: Uint32Array;

  private constructor(state: Uint32Array) {
    this.s = state;
  }

  /** A generator for `seed` (any safe integer), optionally a named stream of it. */
  static seeded(seed: number, stream = ''): Rng {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`Rng.seeded: seed must be a safe integer, got ${seed}`);
    const hi = Math.floor(seed / 2 ** 32);
    // splitmix32 over the seed words and the stream's label: nearby seeds give unrelated streams.
    let x = ((seed >>> 0) ^ Math.imul(hi, 0x27d4eb2f) ^ hashString(stream)) >>> 0;
    const words = new Uint32Array(4);
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      words[i] = hash32(x);
    }
    // The all-zero state is the one xoshiro cannot leave.
    if (words.every((w) => w === 0)) words[0] = 1;
    return new Rng(words);
  }

  static fromState(state: readonly number[]): Rng {
    if (!Array.isArray(state) || state.length !== 4 || !state.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32)) {
      throw new RangeError(`Rng.fromState: expected four unsigned 32-bit integers, got ${JSON.stringify(state)}`);
    }
    if (state.every((w) => w === 0)) throw new RangeError('Rng.fromState: the all-zero state is not a valid xoshiro128** state');
    return new Rng(Uint32Array.from(state));
  }

  state(): RngState {
    return [this.s[0], this.s[1], this.s[2], this.s[3]];
  }

  /** A uniform unsigned 32-bit integer. */
  nextU32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform in [0, 1), 53 random bits. */
  next(): number {
    return ((this.nextU32() >>> 5) * 2 ** 26 + (this.nextU32() >>> 6)) / 2 ** 53;
  }

  /** Uniform integer in [0, n), without modulo bias. */
  int(n: number): number {
    if (!(Number.isInteger(n) && n >= 1 && n <= 2 ** 32)) throw new RangeError(`Rng.int: n must be an integer in [1, 2^32], got ${n}`);
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return x % n;
    }
  }

  /** A seed for an engine or environment: a non-negative 31-bit integer (safe in every JSON and int32 API). */
  seed(): number {
    return this.nextU32() >>> 1;
  }

  /** Fisher-Yates, in place. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }

  /** k distinct indices of [0, n), in draw order. */
  sample(n: number, k: number): number[] {
    if (!(Number.isInteger(k) && k >= 0 && k <= n)) throw new RangeError(`Rng.sample: need 0 <= k <= n, got k=${k}, n=${n}`);
    const picked = new Map<number, number>();
    const out: number[] = [];
    // Partial Fisher-Yates over a virtual array, so memory is O(k) for any n.
    for (let i = 0; i < k; i++) {
      const j = i + this.int(n - i);
      const vj = picked.get(j) ?? j;
      picked.set(j, picked.get(i) ?? i);
      out.push(vj);
    }
    return out;
  }
}
