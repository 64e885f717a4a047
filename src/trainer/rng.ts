// The trainer's random numbers: xoshiro128** (Blackman and Vigna), four 32-bit words of
// state that fit in a checkpoint's JSON, so a resumed run draws exactly the numbers the
// uninterrupted run would have (task sampling, engine seeds, shuffles). Seeding goes
// through splitmix32 so that nearby seeds give unrelated streams.

export type RngState = [number, number, number, number];

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** FNV-1a, to turn stream labels into seeds. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

const rotl = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;

export class Rng {
  private s: Uint32Array;

  private constructor(state: Uint32Array) {
    this.s = state;
  }

  /** A generator for `seed` (any integer; only its low 53 bits matter), optionally a named stream of it. */
  static seeded(seed: number, stream = ''): Rng {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`Rng.seeded: seed must be a safe integer, got ${seed}`);
    const hi = Math.floor(seed / 2 ** 32);
    const mix = splitmix32((seed >>> 0) ^ Math.imul(hi, 0x27d4eb2f) ^ hashString(stream));
    const state = Uint32Array.from([mix(), mix(), mix(), mix()]);
    // The all-zero state is the one xoshiro cannot leave.
    if (state.every((w) => w === 0)) state[0] = 1;
    return new Rng(state);
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
