// RMSNorm over the last dim of x viewed as [rows, h] (Qwen: y = x * rstd * w with
// rstd = 1 / sqrt(mean(x^2) + eps); the q/k-norm of [B, H, T, D] is the same with h = D).
//   forward:     one workgroup per row: strided sum of squares, tree reduction in
//                workgroup memory, then y and the row's rstd (kept for backward).
//   backward_dx: one workgroup per row: dot = sum_j g_j w_j x_j, then
//                dx_i = rstd * (g_i w_i - x_i * rstd^2 * dot / h).
//   backward_dw: column sums of g * x * rstd without atomics: workgroup (row block,
//                column block) sums `rows_per_block` rows for WG columns into
//                partial[row block, column]; the launcher reduces the partials.
// WG (override, a power of two) is the workgroup width, picked per h by the launcher.

override WG: u32 = 256u;

struct Params {
  rows: u32,
  h: u32,
  eps: f32,
  rows_per_block: u32,
  col_blocks: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

fn row_index(wid: vec3u, nwg: vec3u) -> u32 { return wid.y * nwg.x + wid.x; }

fn workgroup_sum(lid: u32, v: f32) -> f32 {
  partial[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) { partial[lid] = partial[lid] + partial[lid + s]; }
    workgroupBarrier();
  }
  let total = partial[0];
  // The next use of `partial` must not overwrite it before everyone has read it.
  workgroupBarrier();
  return total;
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> rstd_out: array<f32>;

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = row_index(wid, nwg);
  if (row >= p.rows) { return; }
  let base = row * p.h;
  var ss = 0.0;
  for (var j = lid.x; j < p.h; j += WG) { let v = x[base + j]; ss += v * v; }
  let r = inverseSqrt(workgroup_sum(lid.x, ss) / f32(p.h) + p.eps);
  for (var j = lid.x; j < p.h; j += WG) { y[base + j] = x[base + j] * r * w[j]; }
  if (lid.x == 0u) { rstd_out[row] = r; }
}

@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read> rstd: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn backward_dx(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = row_index(wid, nwg);
  if (row >= p.rows) { return; }
  let base = row * p.h;
  var d = 0.0;
  for (var j = lid.x; j < p.h; j += WG) { d += g[base + j] * w[j] * x[base + j]; }
  let r = rstd[row];
  let c = r * r * workgroup_sum(lid.x, d) / f32(p.h);
  for (var j = lid.x; j < p.h; j += WG) { dx[base + j] = r * (g[base + j] * w[j] - x[base + j] * c); }
}

@group(0) @binding(2) var<storage, read> g_dw: array<f32>;
@group(0) @binding(3) var<storage, read> rstd_dw: array<f32>;
@group(0) @binding(4) var<storage, read_write> dw_partial: array<f32>;

@compute @workgroup_size(WG)
fn backward_dw(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let b = row_index(wid, nwg);
  let row_block = b / p.col_blocks;
  let col = (b % p.col_blocks) * WG + lid.x;
  let first = row_block * p.rows_per_block;
  if (first >= p.rows || col >= p.h) { return; }
  let last = min(first + p.rows_per_block, p.rows);
  var acc = 0.0;
  for (var row = first; row < last; row++) {
    acc += g_dw[row * p.h + col] * x[row * p.h + col] * rstd_dw[row];
  }
  dw_partial[row_block * p.h + col] = acc;
}
