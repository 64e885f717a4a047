// Rotary position embedding, Hugging Face layout (rotate_half): within the first
// `rot` dims of each head vector, dim d < rot/2 pairs with d + rot/2;
//   y[d]         = x[d] cos(a) - x[d + rot/2] sin(a)
//   y[d + rot/2] = x[d + rot/2] cos(a) + x[d] sin(a)
// with a = f32(position) * inv_freq[d], and dims >= rot pass through (partial
// rotary). SIGN = -1 rotates by -a: the backward.
// Layout: x, y [B, H, T, HD] contiguous; positions [B, T] i32; inv_freq [rot/2] f32,
// computed on the CPU exactly as Hugging Face does in f32. One element per invocation,
// 256 per workgroup, the grid folded into 2D. X_TOKENS (Y_TOKENS) reads x (writes y)
// as [B, T, H, HD] instead, the projections' layout: the head permute that attention
// needs happens in the same pass (and its inverse in the backward's).
// cos/sin use our own range reduction and polynomials: the builtins only promise
// 2^-11 absolute error and only on [-pi, pi], and angles reach thousands of radians.
//
// `qkv_cache` (at the end) is a decode step's attention input in one dispatch: it
// rotates q and k out of the fused q/k/v projection, and writes k and v into the
// KV cache.

override SIGN: f32 = 1.0;
override X_TOKENS: bool = false;
override Y_TOKENS: bool = false;

struct Params {
  n: u32,
  hd: u32,
  t: u32,
  bt_stride: u32,  // H * T * HD: elements per batch row
  half: u32,       // rot / 2
  h: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<i32>;
@group(0) @binding(3) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// (cos a, sin a): a = k pi/2 + r with |r| <= pi/4 (Cody-Waite: pi/2 split into three
// parts, the leading one of 8 bits so that k times it is exact for |k| < 2^16), then
// Cephes' sinf/cosf polynomials on r.
fn cos_sin(a: f32) -> vec2f {
  let k = round(a * 0.63661977236758134);
  let r = ((a - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
  let z = r * r;
  let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  switch (i32(k) & 3) {
    case 0: { return vec2f(c, s); }
    case 1: { return vec2f(-s, c); }
    case 2: { return vec2f(-c, -s); }
    default: { return vec2f(s, -c); }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid.x;
  if (i >= p.n) { return; }
  // i walks [B, H, T, HD]; the token-major index of the same element is its
  // ((b T + t) H + h) HD + d.
  let d = i % p.hd;
  let row = i / p.hd;
  let t = row % p.t;
  let b = i / p.bt_stride;
  let h = (row / p.t) % p.h;
  let tok = ((b * p.t + t) * p.h + h) * p.hd + d;
  let xi = select(i, tok, X_TOKENS);
  let yi = select(i, tok, Y_TOKENS);
  if (d >= 2u * p.half) {
    y[yi] = x[xi];
    return;
  }
  let pos = positions[b * p.t + t];
  let j = d % p.half;
  let cs = cos_sin(f32(pos) * inv_freq[j]);
  let sn = SIGN * cs.y;
  if (d < p.half) {
    y[yi] = x[xi] * cs.x - x[xi + p.half] * sn;
  } else {
    y[yi] = x[xi] * cs.x + x[xi - p.half] * sn;
  }
}

// ---- qkv_cache: q/k-norm, rotation and the KV-cache append of one step ----
//
// In: qkv [B*T, (HQ + 2 HKV) * HD], each row the q heads, then the k heads, then the v
// heads (the skinny_concat product of q_proj, k_proj, v_proj). Out: q rotated into
// q_out [B, HQ, T, HD] (what attention reads), k rotated and v as is into the caches
// [B, HKV, cap, HD] at positions offset..offset+T-1. With QK_NORM, q and k heads are
// first RMS-normalised over HD with their weights (Qwen3), y = x * rstd * w as the
// rmsnorm kernel computes it. One workgroup of 64 per (row, head), folded into 2D; each
// lane takes every 64th element of the head, so the norm is one tree reduction.

override QK_NORM: bool = false;
const QKV_WG = 64u;

struct QkvParams {
  rows: u32,        // B * T
  t: u32,
  hq: u32,
  hkv: u32,
  hd: u32,
  half: u32,        // rot / 2
  cap: u32,
  offset: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> pq: QkvParams;
// qkv is `x` (binding 1), then positions and inv_freq as above.
@group(0) @binding(4) var<storage, read> q_norm: array<f32>;
@group(0) @binding(5) var<storage, read> k_norm: array<f32>;
@group(0) @binding(6) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(7) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(8) var<storage, read_write> v_cache: array<f32>;

var<workgroup> qkv_partial: array<f32, QKV_WG>;

// Element d of the head at `base`, normalised when `r` is its rstd (1 without a norm).
fn head_value(base: u32, d: u32, r: f32, is_q: bool) -> f32 {
  if (!QK_NORM) { return x[base + d]; }
  return x[base + d] * r * select(k_norm[d], q_norm[d], is_q);
}

@compute @workgroup_size(QKV_WG)
fn qkv_cache(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let heads = pq.hq + 2u * pq.hkv;
  let g = wid.y * nwg.x + wid.x;
  if (g >= pq.rows * heads) { return; }
  let row = g / heads;
  let head = g % heads;
  let b = row / pq.t;
  let t = row % pq.t;
  let base = g * pq.hd;
  if (head >= pq.hq + pq.hkv) {
    let at = ((b * pq.hkv + head - pq.hq - pq.hkv) * pq.cap + pq.offset + t) * pq.hd;
    for (var d = lid.x; d < pq.hd; d += QKV_WG) { v_cache[at + d] = x[base + d]; }
    return;
  }
  let is_q = head < pq.hq;
  var r = 1.0;
  if (QK_NORM) {
    var ss = 0.0;
    for (var d = lid.x; d < pq.hd; d += QKV_WG) { let v = x[base + d]; ss += v * v; }
    qkv_partial[lid.x] = ss;
    workgroupBarrier();
    for (var s = QKV_WG / 2u; s > 0u; s >>= 1u) {
      if (lid.x < s) { qkv_partial[lid.x] += qkv_partial[lid.x + s]; }
      workgroupBarrier();
    }
    r = inverseSqrt(qkv_partial[0] / f32(pq.hd) + pq.eps);
  }
  let pos = positions[b * pq.t + t];
  for (var d = lid.x; d < pq.hd; d += QKV_WG) {
    var y = head_value(base, d, r, is_q);
    if (d < 2u * pq.half) {
      let cs = cos_sin(f32(pos) * inv_freq[d % pq.half]);
      if (d < pq.half) {
        y = y * cs.x - head_value(base, d + pq.half, r, is_q) * cs.y;
      } else {
        y = y * cs.x + head_value(base, d - pq.half, r, is_q) * cs.y;
      }
    }
    if (is_q) {
      q_out[((b * pq.hq + head) * pq.t + t) * pq.hd + d] = y;
    } else {
      k_cache[((b * pq.hkv + head - pq.hq) * pq.cap + pq.offset + t) * pq.hd + d] = y;
    }
  }
}
