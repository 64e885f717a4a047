// IEEE half (f16) and bfloat16 <-> f32 conversion for checkpoint storage.
// Encoding rounds to nearest, ties to even, as PyTorch's .to(float16/bfloat16) does, so
// a checkpoint we write in bf16 holds the same bits transformers would have written.

let f16Table: Float32Array | null = null;

/** All 65536 half-precision values, built once: decoding a tensor is then one lookup per element. */
function halfTable(): Float32Array {
  if (f16Table) return f16Table;
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) t[h] = sign * mant * 2 ** -24;
    else if (exp === 31) t[h] = mant ? NaN : sign * Infinity;
    else t[h] = sign * (1 + mant / 1024) * 2 ** (exp - 15);
  }
  f16Table = t;
  return t;
}

export function f16ToF32(src: Uint16Array): Float32Array {
  const t = halfTable();
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = t[src[i]];
  return out;
}

export function bf16ToF32(src: Uint16Array): Float32Array {
  const out = new Float32Array(src.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < src.length; i++) bits[i] = src[i] << 16;
  return out;
}

export function f32ToBf16(src: Float32Array): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const x = bits[i];
    if ((x & 0x7fffffff) > 0x7f800000) out[i] = (x >>> 16) | 0x40;
    else out[i] = (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return out;
}

export function f32ToF16(src: Float32Array): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = halfBits(bits[i]);
  return out;
}

function halfBits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}
