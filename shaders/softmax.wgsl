// Row-wise softmax and log-softmax over the last axis of an f32 tensor viewed as
// [rows, n], with their backward passes.
//   forward:  y = softmax(x) (LOG = 0) or y = x - logsumexp(x) (LOG = 1)
//   backward: dx = y * (g - sum(g * y))        (LOG = 0, y the softmax)
//             dx = g - exp(y) * sum(g)         (LOG = 1, y the log-softmax)
// Layout: contiguous rows of length n. Tiling: one 256-wide workgroup per row (the
// grid folded into 2D past 65535 rows); each invocation walks the row with stride
// 256, so any n works (151,936 for Qwen's vocabulary). The forward keeps an online
// (max, sum of exp) per invocation, so it reads the row once for the statistics and
// once to write; the pairs are merged by a tree reduction in workgroup memory.

override LOG: u32 = 0u;

struct Params {
  rows: u32,
  n: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;
// Stands in for -inf: a running max that has seen no element yet.
const NONE: f32 = -3.4028234e38;

var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_s: array<f32, WG>;

// Merges two (max, sum of exp(x - max)) pairs; a pair with s == 0 holds no element.
fn merge(ma: f32, sa: f32, mb: f32, sb: f32) -> vec2f {
  if (sb == 0.0) { return vec2f(ma, sa); }
  if (sa == 0.0) { return vec2f(mb, sb); }
  let m = max(ma, mb);
  return vec2f(m, sa * exp(ma - m) + sb * exp(mb - m));
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  // Workgroup-uniform exit: every invocation of the group takes the same branch.
  if (row >= p.rows) { return; }
  let base = row * p.n;
  var m = NONE;
  var s = 0.0;
  for (var i = lid.x; i < p.n; i += WG) {
    let v = x[base + i];
    if (v > m) {
      s = s * exp(m - v) + 1.0;
      m = v;
    } else {
      s += exp(v - m);
    }
  }
  red_m[lid.x] = m;
  red_s[lid.x] = s;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k / 2u) {
    if (lid.x < k) {
      let r = merge(red_m[lid.x], red_s[lid.x], red_m[lid.x + k], red_s[lid.x + k]);
      red_m[lid.x] = r.x;
      red_s[lid.x] = r.y;
    }
    workgroupBarrier();
  }
  let mx = red_m[0];
  let total = red_s[0];
  if (LOG == 1u) {
    let lse = mx + log(total);
    for (var i = lid.x; i < p.n; i += WG) { y[base + i] = x[base + i] - lse; }
  } else {
    let inv = 1.0 / total;
    for (var i = lid.x; i < p.n; i += WG) { y[base + i] = exp(x[base + i] - mx) * inv; }
  }
}

var<workgroup> red_g: array<f32, WG>;

@group(0) @binding(1) var<storage, read> yb: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) { return; }
  let base = row * p.n;
  var acc = 0.0;
  for (var i = lid.x; i < p.n; i += WG) {
    if (LOG == 1u) { acc += g[base + i]; } else { acc += g[base + i] * yb[base + i]; }
  }
  red_g[lid.x] = acc;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k / 2u) {
    if (lid.x < k) { red_g[lid.x] += red_g[lid.x + k]; }
    workgroupBarrier();
  }
  let total = red_g[0];
  for (var i = lid.x; i < p.n; i += WG) {
    if (LOG == 1u) {
      dx[base + i] = g[base + i] - exp(yb[base + i]) * total;
    } else {
      dx[base + i] = yb[base + i] * (g[base + i] - total);
    }
  }
}
