// The skinny products' kernels (shaders/matmul/skinny.wgsl and skinny_f16.wgsl), with
// the weights read through skinny_w0, skinny_w1 and skinny_w2 (the weight at binding
// 2, 3 and 4 as vec4s of f32), which each including file defines for its storage;
// sizes in common/matmul_params.wgsl.
//
// C = act(A @ B^T + bias) (C += ... with ACCUM) for A of M rows [M, K] and B stored
// [N, K] (a Linear layer's weight), K a multiple of 4, offset_a and offset_b too;
// batch 1. A decode step multiplies one to a few dozen rows by every weight; the tiled
// kernel would give that product one row of output tiles, a few dozen workgroups each
// streaming a long strip of B through one SM, so the weight (the whole cost) is read
// at a small fraction of the memory bandwidth. Here each output column is a dot
// product of one row of B with the rows of A: the 32 lanes of a column read that row
// as consecutive vec4s (coalesced), each keeping SKINNY_ROWS partial sums, and a
// workgroup-memory tree adds up the lanes. A workgroup of 256 serves 8 columns
// (x and y of the grid, folded past 65535); workgroup z takes rows
// [z * SKINNY_ROWS, z * SKINNY_ROWS + SKINNY_ROWS), so B is read once per that many
// rows. tiles_n carries the grid's x extent.
//
// A decode step is bound by its dispatches more than by its arithmetic, so three
// variants fold the neighbours of a projection into it:
// - `skinny` with RESID adds `resid` (laid out like C) last: the residual connection
//   after o_proj and down_proj, without mutating the residual stream in place.
// - `skinny_concat` multiplies A by up to three weights in one dispatch (q, k and v):
//   C's columns are weight 0's n0, then weight 1's n1, then weight 2's, each with its
//   own bias, i.e. the product with the weights stacked. Its 8 storage bindings are
//   the least any WebGPU device offers (maxStorageBuffersPerShaderStage);
//   `skinny_concat_norm` takes the attention's RMSNorm too, as skinny_swiglu's NORM_A
//   does, with its weight as a ninth.
// - `skinny_swiglu` keeps two dot products per column, against the gate and the up
//   weight (two planes of partial sums), and writes silu(gate) * up. With NORM_A it
//   takes the MLP's RMSNorm too: A's rows are normalised on the way in, which saves
//   the norm's own dispatch. Each workgroup first sums its rows' squares (all 256
//   lanes over K, a tree in the partial-sum memory), then folds the norm weight into
//   the weight vec4s it reads and the rows' 1/rms into the two totals.

// #include "common/matmul_params.wgsl"
// #include "common/matmul_epilogue.wgsl"

override SKINNY_ROWS: u32 = 1u;    // 1..SKINNY_MAX_ROWS
const SKINNY_MAX_ROWS = 8u;
override SKINNY_PLANES: u32 = 1u;  // dot products per column: 2 in skinny_swiglu
override RESID: bool = false;
override NORM_A: bool = false;     // skinny_swiglu: RMSNorm A's rows first
const SKINNY_LANES = 32u;
const SKINNY_COLS = 8u;
const SKINNY_WG = 256u;

var<workgroup> skinny_sum: array<f32, SKINNY_PLANES * SKINNY_ROWS * SKINNY_WG>;
var<workgroup> skinny_inv_rms: array<f32, SKINNY_MAX_ROWS>;

@group(0) @binding(5) var<storage, read> resid: array<f32>;

// Where a lane works: the output column its group of 32 serves, its lane in that
// group, and the rows of A of its workgroup.
struct SkinnyAt {
  col: u32,
  lane: u32,
  row0: u32,
  rows: u32,
}

// Row blocks vary fastest (workgroup x), column groups over y and z (a folded 1-D
// grid of tiles_n per z): the workgroups that read the same weight rows are
// dispatched together, so past the first row block they find them in L2 rather than
// streaming the weights once per row block.
fn skinny_at(wid: vec3u, li: u32, tiles_n: u32, m: u32) -> SkinnyAt {
  let row0 = wid.x * SKINNY_ROWS;
  return SkinnyAt((wid.z * tiles_n + wid.y) * SKINNY_COLS + li / SKINNY_LANES, li % SKINNY_LANES, row0, min(SKINNY_ROWS, m - row0));
}

fn skinny_store(plane: u32, li: u32, acc: array<f32, SKINNY_MAX_ROWS>) {
  for (var r = 0u; r < SKINNY_ROWS; r++) { skinny_sum[(plane * SKINNY_ROWS + r) * SKINNY_WG + li] = acc[r]; }
}

// Adds up the 32 lanes of every column, in every plane and row.
fn skinny_tree(lane: u32, li: u32) {
  workgroupBarrier();
  for (var s = SKINNY_LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      for (var i = 0u; i < SKINNY_PLANES * SKINNY_ROWS; i++) { skinny_sum[i * SKINNY_WG + li] += skinny_sum[i * SKINNY_WG + li + s]; }
    }
    workgroupBarrier();
  }
}

// After skinny_tree, lane r of a column reads row row0 + r of a plane.
fn skinny_total(at: SkinnyAt, li: u32, plane: u32) -> f32 {
  return skinny_sum[(plane * SKINNY_ROWS + at.lane) * SKINNY_WG + li - at.lane];
}

// 1 / rms (with eps) of each of the workgroup's `rows` rows of A, which start at vec4
// ab, k4 vec4s each, into skinny_inv_rms. Every invocation must call it (barriers);
// it leaves skinny_sum free again.
fn skinny_row_scales(ab: u32, rows: u32, k4: u32, li: u32, eps: f32) {
  for (var r = 0u; r < SKINNY_ROWS; r++) {
    var ss = 0.0;
    if (r < rows) {
      for (var q = li; q < k4; q += SKINNY_WG) {
        let v = a[ab + r * k4 + q];
        ss += dot(v, v);
      }
    }
    skinny_sum[r * SKINNY_WG + li] = ss;
  }
  workgroupBarrier();
  for (var s = SKINNY_WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      for (var r = 0u; r < SKINNY_ROWS; r++) { skinny_sum[r * SKINNY_WG + li] += skinny_sum[r * SKINNY_WG + li + s]; }
    }
    workgroupBarrier();
  }
  if (li < SKINNY_ROWS) { skinny_inv_rms[li] = inverseSqrt(skinny_sum[li * SKINNY_WG] / f32(k4 * 4u) + eps); }
  workgroupBarrier();
}

@compute @workgroup_size(SKINNY_WG)
fn skinny(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let at = skinny_at(wid, li, p.tiles_n, p.m);
  let k4 = p.k / 4u;
  var acc: array<f32, SKINNY_MAX_ROWS>;
  if (at.col < p.n) {
    let wb = p.offset_b / 4u + at.col * k4;
    let ab = p.offset_a / 4u + at.row0 * k4;
    for (var q = at.lane; q < k4; q += SKINNY_LANES) {
      let w = skinny_w0(wb + q);
      for (var r = 0u; r < SKINNY_ROWS; r++) {
        if (r < at.rows) { acc[r] += dot(a[ab + r * k4 + q], w); }
      }
    }
  }
  skinny_store(0u, li, acc);
  skinny_tree(at.lane, li);
  if (at.col >= p.n || at.lane >= at.rows) { return; }
  var v = skinny_total(at, li, 0u);
  if (BIAS) { v += bias[at.col / 4u][at.col % 4u]; }
  let i = p.offset_c + (at.row0 + at.lane) * p.n + at.col;
  v = activate(vec4f(v)).x;
  if (RESID) { v += resid[i]; }
  if (ACCUM) { v += c[i]; }
  c[i] = v;
}

struct SkinnyParams {
  m: u32,
  n: u32,           // columns of C: all weights' together
  k: u32,
  tiles_n: u32,
  n0: u32,          // columns from weight 0 (skinny_concat)
  n1: u32,          // from weight 1; the rest from weight 2
  eps: f32,         // RMSNorm epsilon (NORM_A)
}

@group(0) @binding(0) var<uniform> ps: SkinnyParams;
// Weight 0 is read by skinny_w0 (binding 2), weights 1 and 2 by skinny_w1 and
// skinny_w2 (bindings 3 and 4); A is `a` (binding 1), all at offset 0.
@group(0) @binding(5) var<storage, read> bias0: array<f32>;
@group(0) @binding(6) var<storage, read> bias1: array<f32>;
@group(0) @binding(7) var<storage, read> bias2: array<f32>;
@group(0) @binding(8) var<storage, read_write> c_concat: array<f32>;

fn concat_weight(w: u32, i: u32) -> vec4f {
  switch w {
    case 0u: { return skinny_w0(i); }
    case 1u: { return skinny_w1(i); }
    default: { return skinny_w2(i); }
  }
}

fn concat_bias(w: u32, j: u32) -> f32 {
  switch w {
    case 0u: { return bias0[j]; }
    case 1u: { return bias1[j]; }
    default: { return bias2[j]; }
  }
}

// Which weight column `col` comes from, and its row there. The 32 lanes of a column
// agree, so the choice never diverges within a warp.
fn concat_source(col: u32) -> vec2u {
  let w = select(select(2u, 1u, col < ps.n0 + ps.n1), 0u, col < ps.n0);
  return vec2u(w, col - select(select(ps.n0 + ps.n1, ps.n0, w == 1u), 0u, w == 0u));
}

// Sums the lanes' partial dot products and writes each row's total (times the row's
// 1/rms when `normed`), plus the bias.
fn concat_finish(at: SkinnyAt, li: u32, src: vec2u, acc: array<f32, SKINNY_MAX_ROWS>, normed: bool) {
  skinny_store(0u, li, acc);
  skinny_tree(at.lane, li);
  if (at.col >= ps.n || at.lane >= at.rows) { return; }
  var v = skinny_total(at, li, 0u);
  if (normed) { v *= skinny_inv_rms[at.lane]; }
  if (BIAS) { v += concat_bias(src.x, src.y); }
  c_concat[(at.row0 + at.lane) * ps.n + at.col] = v;
}

@compute @workgroup_size(SKINNY_WG)
fn skinny_concat(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let at = skinny_at(wid, li, ps.tiles_n, ps.m);
  let k4 = ps.k / 4u;
  let src = concat_source(at.col);
  var acc: array<f32, SKINNY_MAX_ROWS>;
  if (at.col < ps.n) {
    let ab = at.row0 * k4;
    for (var q = at.lane; q < k4; q += SKINNY_LANES) {
      let x = concat_weight(src.x, src.y * k4 + q);
      for (var r = 0u; r < SKINNY_ROWS; r++) {
        if (r < at.rows) { acc[r] += dot(a[ab + r * k4 + q], x); }
      }
    }
  }
  concat_finish(at, li, src, acc, false);
}

// The attention block's RMSNorm weight [k] for skinny_concat_norm: a ninth storage
// binding, which devices offering only WebGPU's minimum of 8 lack (the launcher
// checks), hence an entry point of its own rather than a NORM_A branch.
@group(0) @binding(9) var<storage, read> concat_norm: array<vec4f>;

// skinny_concat of rmsNorm(A) (eps ps.eps), the norm folded in as in skinny_swiglu.
@compute @workgroup_size(SKINNY_WG)
fn skinny_concat_norm(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let at = skinny_at(wid, li, ps.tiles_n, ps.m);
  let k4 = ps.k / 4u;
  skinny_row_scales(at.row0 * k4, at.rows, k4, li, ps.eps);
  let src = concat_source(at.col);
  var acc: array<f32, SKINNY_MAX_ROWS>;
  if (at.col < ps.n) {
    let ab = at.row0 * k4;
    for (var q = at.lane; q < k4; q += SKINNY_LANES) {
      let x = concat_weight(src.x, src.y * k4 + q) * concat_norm[q];
      for (var r = 0u; r < SKINNY_ROWS; r++) {
        if (r < at.rows) { acc[r] += dot(a[ab + r * k4 + q], x); }
      }
    }
  }
  concat_finish(at, li, src, acc, true);
}

// The RMSNorm weight [k] under NORM_A (any buffer otherwise).
@group(0) @binding(5) var<storage, read> swiglu_norm: array<vec4f>;

// Gate weight skinny_w0, up weight skinny_w1, output `c` (binding 4).
@compute @workgroup_size(SKINNY_WG)
fn skinny_swiglu(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let at = skinny_at(wid, li, ps.tiles_n, ps.m);
  let k4 = ps.k / 4u;
  if (NORM_A) { skinny_row_scales(at.row0 * k4, at.rows, k4, li, ps.eps); }
  var gate: array<f32, SKINNY_MAX_ROWS>;
  var up: array<f32, SKINNY_MAX_ROWS>;
  if (at.col < ps.n) {
    let wb = at.col * k4;
    let ab = at.row0 * k4;
    for (var q = at.lane; q < k4; q += SKINNY_LANES) {
      var wg = skinny_w0(wb + q);
      var wu = skinny_w1(wb + q);
      if (NORM_A) {
        let nw = swiglu_norm[q];
        wg *= nw;
        wu *= nw;
      }
      for (var r = 0u; r < SKINNY_ROWS; r++) {
        if (r < at.rows) {
          let x = a[ab + r * k4 + q];
          gate[r] += dot(x, wg);
          up[r] += dot(x, wu);
        }
      }
    }
  }
  skinny_store(0u, li, gate);
  skinny_store(1u, li, up);
  skinny_tree(at.lane, li);
  if (at.col >= ps.n || at.lane >= at.rows) { return; }
  var g = skinny_total(at, li, 0u);
  var u = skinny_total(at, li, 1u);
  if (NORM_A) {
    g *= skinny_inv_rms[at.lane];
    u *= skinny_inv_rms[at.lane];
  }
  c[(at.row0 + at.lane) * ps.n + at.col] = g / (1.0 + exp(-g)) * u;
}
