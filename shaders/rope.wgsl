// Rotary position embedding, Hugging Face layout (rotate_half): within the first
// `rot` dims of each head vector, dim d < rot/2 pairs with d + rot/2;
//   y[d]         = x[d] cos(a) - x[d + rot/2] sin(a)
//   y[d + rot/2] = x[d + rot/2] cos(a) + x[d] sin(a)
// with a = f32(position) * inv_freq[d], and dims >= rot pass through (partial
// rotary). SIGN = -1 rotates by -a: the backward.
// Layout: x, y [B, H, T, HD] contiguous; positions [B, T] i32; inv_freq [rot/2] f32,
// computed on the CPU exactly as Hugging Face does in f32. One element per invocation,
// 256 per workgroup, the grid folded into 2D.
// cos/sin use our own range reduction and polynomials: the builtins only promise
// 2^-11 absolute error and only on [-pi, pi], and angles reach thousands of radians.

override SIGN: f32 = 1.0;

struct Params {
  n: u32,
  hd: u32,
  t: u32,
  bt_stride: u32,  // H * T * HD: elements per batch row
  half: u32,       // rot / 2
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
  let d = i % p.hd;
  if (d >= 2u * p.half) {
    y[i] = x[i];
    return;
  }
  let row = i / p.hd;
  let b = i / p.bt_stride;
  let pos = positions[b * p.t + row % p.t];
  let j = d % p.half;
  let cs = cos_sin(f32(pos) * inv_freq[j]);
  let sn = SIGN * cs.y;
  if (d < p.half) {
    y[i] = x[i] * cs.x - x[i + p.half] * sn;
  } else {
    y[i] = x[i] * cs.x + x[i - p.half] * sn;
  }
}
