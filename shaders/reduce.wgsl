// Reductions of f32 tensors viewed as [outer, R, inner] over the middle axis.
//   reduce_rows:  inner == 1; one 256-wide workgroup per row, strided loads,
//                 tree reduction in workgroup memory.
//   reduce_cols:  inner > 1; one invocation per (outer, inner) output walking R,
//                 so neighbouring invocations read neighbouring addresses.
// OP: 0 sum, 1 max, 2 mean (sum scaled by 1/R).

override OP: u32 = 0u;

struct Params {
  outer: u32,
  r: u32,
  inner: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const WG: u32 = 256u;
var<workgroup> partial: array<f32, WG>;

fn identity() -> f32 {
  if (OP == 1u) { return -3.4028234e38; }
  return 0.0;
}

fn combine(a: f32, b: f32) -> f32 {
  if (OP == 1u) { return max(a, b); }
  return a + b;
}

fn finish(v: f32) -> f32 {
  if (OP == 2u) { return v / f32(p.r); }
  return v;
}

@compute @workgroup_size(256)
fn reduce_rows(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.outer) { return; }
  let base = row * p.r;
  var acc = identity();
  for (var i = lid.x; i < p.r; i += WG) { acc = combine(acc, x[base + i]); }
  partial[lid.x] = acc;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid.x < s) { partial[lid.x] = combine(partial[lid.x], partial[lid.x + s]); }
    workgroupBarrier();
  }
  if (lid.x == 0u) { y[row] = finish(partial[0]); }
}

@compute @workgroup_size(256)
fn reduce_cols(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let j = (wid.y * nwg.x + wid.x) * WG + lid.x;
  if (j >= p.outer * p.inner) { return; }
  let o = j / p.inner;
  let c = j % p.inner;
  let base = o * p.r * p.inner + c;
  var acc = identity();
  for (var i = 0u; i < p.r; i++) { acc = combine(acc, x[base + i * p.inner]); }
  y[j] = finish(acc);
}
