// Flash attention backward on tensor cores: from dO, the forward's lse and
// delta = rowsum(dO * O) (shaders/attention.wgsl `delta`),
//   P = exp(scale * q k^T + mask - lse), dP = dO v^T, dS = P * (dP - delta),
//   dV = P^T dO, dK = scale * dS^T q, dQ = scale * dS k,
// with the layout, masking, uniform and bindings of shaders/attention.wgsl's blocked
// backward (q, dO, dQ [B, Hq, Tq, HD]; k, v [B, Hkv, S_cap, HD]; lse, delta [B, Hq, Tq];
// dK, dV partials [B, Hq, S, HD] summed over a group by `sum_group`, or dK, dV
// themselves when a kv head has one query head).
//
// Precision: q, k, v, sigma * dO, P and sigma * dS are rounded to f16 as they are staged,
// products summed in f32; scores, exponentials and dP - delta are f32.
// src/reference/attention.ts `attentionBackwardF16` computes the same. sigma (binding
// 10: [sigma, 1 / sigma], from shaders/grad_scale.wgsl `product_scale`) is a power of two
// with 2 * HD * max|dO| * max|v| * sigma under 2^14: every |dP - delta| <= 2 HD max|dO|
// max|v| and P <= 1, so no scaled dS can leave f16's range, and gradients far below
// f16's smallest normal keep their digits. The outputs are unscaled by 1 / sigma.
//
// Tiling, as attention_tensor.wgsl's forward: subgroup s of SGS owns 16 rows of a block
// of 16 * SGS, and tiles of 32 rows of the other side pass through workgroup memory.
// backward_dkv_tensor: a workgroup owns 16 * SGS keys of one query head, its subgroups'
// keys and values held as left operands for the whole pass; each query tile gives
// S^T = K q^T and dP^T = V dO^T (16 x 32 a subgroup), P^T and dS^T go to f16 tiles,
// and dV += P^T dO, dK += dS^T q. backward_dq_tensor: a workgroup owns 16 * SGS query
// rows, its subgroups' q and dO rows held as left operands; each key tile gives S = q K^T
// and dP = dO V^T, dS goes to an f16 tile, and dQ += dS K. Subgroup matrices cannot be
// read element by element, so S and dP go through a 16 x 32 f32 scratch of the
// subgroup, where lane l serves row l / 2 and the half l % 2 of the columns.
//
// Needs what the forward needs (`shader-f16`, `subgroups`,
// `chromium-experimental-subgroup-matrix` with 16x16x16 f16 -> f32, subgroups of 32) and
// 10 storage buffers a staged; head dims that are multiples of 16 up to 64, so a
// subgroup's operands and accumulators stay in registers. Loop bounds depend only on
// workgroup_id, the uniform and the batch row's padding, and the barriers are
// workgroup-wide, so the subgroup-matrix calls sit in subgroup-uniform control flow.

enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

override HD: u32 = 64u;          // a multiple of 16, at most 64
override SGS: u32 = 4u;          // subgroups a workgroup
const SUBGROUP: u32 = 32u;
const TILE: u32 = 32u;           // rows of the other side a loop step
const PAD: u32 = 8u;             // halves of padding a stored row (16-byte aligned rows)
override BR: u32 = 16u * SGS;    // the workgroup's own rows (queries in dq, keys in dkv)
const BC: u32 = TILE;            // keys a tile (key_range in the include)
override THREADS: u32 = SUBGROUP * SGS;
override HD4: u32 = HD / 4u;
override LD: u32 = HD + PAD;     // halves from one staged row to the next
const LDP: u32 = TILE + PAD;     // halves from one stored P or dS row to the next
const SFRAG: u32 = 16u * TILE;   // floats of a subgroup's scratch
const STAGE_ROWS: u32 = 64u;     // 2 * TILE, and BR at most

// #include "common/attention_mask.wgsl"

@group(0) @binding(1) var<storage, read> q4: array<vec4f>;
@group(0) @binding(2) var<storage, read> k4: array<vec4f>;
@group(0) @binding(3) var<storage, read> v4: array<vec4f>;
@group(0) @binding(5) var<storage, read> do4: array<vec4f>;
@group(0) @binding(6) var<storage, read> lse_in: array<f32>;
@group(0) @binding(7) var<storage, read> delta_in: array<f32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> out_k: array<f32>;
@group(0) @binding(9) var<storage, read_write> out_v: array<f32>;
@group(0) @binding(10) var<storage, read> sigma: array<f32, 2>;

// The block's own rows at the start, then each tile's two operands (rows 0..31 and 32..63).
var<workgroup> staged: array<f16, STAGE_ROWS * LD>;
var<workgroup> scratch: array<f32, SGS * SFRAG>;
var<workgroup> tp_h: array<f16, SGS * 16u * LDP>;
var<workgroup> tds_h: array<f16, SGS * 16u * LDP>;
var<workgroup> row_lse: array<f32, STAGE_ROWS>;
var<workgroup> row_delta: array<f32, STAGE_ROWS>;   // sigma * delta

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Result = subgroup_matrix_result<f32, 16, 16>;
// A subgroup's 16 rows of an HD-wide operand or accumulator, 16 columns each; entries
// past HD / 16 go unused. Indexed by constants only.
alias Lefts = array<Left, 4>;
alias Band = array<Result, 4>;

// `n` rows from row `first` (of the rows starting at vec4 `base4`, zero from row `limit`
// on) into staged rows at `at`, times `factor`, rounded to f16.
fn stage_rows(li: u32, src: u32, base4: u32, first: u32, n: u32, limit: u32, at: u32, factor: f32) {
  for (var e = li; e < n * HD4; e += THREADS) {
    let r = e / HD4;
    let c = e % HD4;
    var x = vec4f(0.0);
    if (first + r < limit) {
      let i = base4 + (first + r) * HD4 + c;
      if (src == 0u) { x = q4[i]; } else if (src == 1u) { x = k4[i]; } else if (src == 2u) { x = v4[i]; } else { x = do4[i] * factor; }
    }
    let h = vec4<f16>(x);
    let o = (at + r) * LD + c * 4u;
    staged[o] = h.x;
    staged[o + 1u] = h.y;
    staged[o + 2u] = h.z;
    staged[o + 3u] = h.w;
  }
}

// lse and sigma * delta of `n` rows from `first` of the head's rows at `row0`.
fn stage_stats(li: u32, row0: u32, first: u32, n: u32) {
  for (var r = li; r < n; r += THREADS) {
    var l = 0.0;
    var dl = 0.0;
    if (first + r < p.tq) {
      l = lse_in[row0 + first + r];
      dl = delta_in[row0 + first + r] * sigma[0];
    }
    row_lse[r] = l;
    row_delta[r] = dl;
  }
}

// Staged rows at..at+15 as left operands, 16 columns each.
fn lefts(at: u32) -> Lefts {
  var m: Lefts;
  m[0] = subgroupMatrixLoad<Left, row_major>(&staged, at * LD, LD);
  if (HD > 16u) { m[1] = subgroupMatrixLoad<Left, row_major>(&staged, at * LD + 16u, LD); }
  if (HD > 32u) { m[2] = subgroupMatrixLoad<Left, row_major>(&staged, at * LD + 32u, LD); }
  if (HD > 48u) { m[3] = subgroupMatrixLoad<Left, row_major>(&staged, at * LD + 48u, LD); }
  return m;
}

// The subgroup's 16 rows (`a`) against the 32 staged rows from `at` (read transposed:
// a [row][d] tile is the right operand's columns) into its scratch: a X^T, 16 x 32.
fn products_t(a: ptr<function, Lefts>, sg: u32, at: u32) {
  var s0: Result;
  var s1: Result;
  let o0 = at * LD;
  let o1 = (at + 16u) * LD;
  s0 = subgroupMatrixMultiplyAccumulate((*a)[0], subgroupMatrixLoad<Right, col_major>(&staged, o0, LD), s0);
  s1 = subgroupMatrixMultiplyAccumulate((*a)[0], subgroupMatrixLoad<Right, col_major>(&staged, o1, LD), s1);
  if (HD > 16u) {
    s0 = subgroupMatrixMultiplyAccumulate((*a)[1], subgroupMatrixLoad<Right, col_major>(&staged, o0 + 16u, LD), s0);
    s1 = subgroupMatrixMultiplyAccumulate((*a)[1], subgroupMatrixLoad<Right, col_major>(&staged, o1 + 16u, LD), s1);
  }
  if (HD > 32u) {
    s0 = subgroupMatrixMultiplyAccumulate((*a)[2], subgroupMatrixLoad<Right, col_major>(&staged, o0 + 32u, LD), s0);
    s1 = subgroupMatrixMultiplyAccumulate((*a)[2], subgroupMatrixLoad<Right, col_major>(&staged, o1 + 32u, LD), s1);
  }
  if (HD > 48u) {
    s0 = subgroupMatrixMultiplyAccumulate((*a)[3], subgroupMatrixLoad<Right, col_major>(&staged, o0 + 48u, LD), s0);
    s1 = subgroupMatrixMultiplyAccumulate((*a)[3], subgroupMatrixLoad<Right, col_major>(&staged, o1 + 48u, LD), s1);
  }
  subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, s0, TILE);
  subgroupMatrixStore<row_major>(&scratch, sg * SFRAG + 16u, s1, TILE);
}

// acc += W X, W the subgroup's 16 x 32 f16 tile in `w` (tp_h or tds_h, selected by
// `which`), X the 32 staged rows from `at`.
fn accumulate(acc: ptr<function, Band>, which: u32, sg: u32, at: u32) {
  for (var kk = 0u; kk < TILE; kk += 16u) {
    var w: Left;
    if (which == 0u) {
      w = subgroupMatrixLoad<Left, row_major>(&tp_h, sg * 16u * LDP + kk, LDP);
    } else {
      w = subgroupMatrixLoad<Left, row_major>(&tds_h, sg * 16u * LDP + kk, LDP);
    }
    let o = (at + kk) * LD;
    (*acc)[0] = subgroupMatrixMultiplyAccumulate(w, subgroupMatrixLoad<Right, row_major>(&staged, o, LD), (*acc)[0]);
    if (HD > 16u) { (*acc)[1] = subgroupMatrixMultiplyAccumulate(w, subgroupMatrixLoad<Right, row_major>(&staged, o + 16u, LD), (*acc)[1]); }
    if (HD > 32u) { (*acc)[2] = subgroupMatrixMultiplyAccumulate(w, subgroupMatrixLoad<Right, row_major>(&staged, o + 32u, LD), (*acc)[2]); }
    if (HD > 48u) { (*acc)[3] = subgroupMatrixMultiplyAccumulate(w, subgroupMatrixLoad<Right, row_major>(&staged, o + 48u, LD), (*acc)[3]); }
  }
}

// The lane's 8 values (row lane / 2, columns (lane % 2) * 8 ..) of column block n
// (16 columns) of the subgroup's 16 output rows, through the subgroup's scratch.
fn lane_values(acc: ptr<function, Band>, n: u32, sg: u32, lane: u32) -> array<f32, 8> {
  if (n == 0u) { subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, (*acc)[0], 16u); }
  else if (n == 1u) { subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, (*acc)[1], 16u); }
  else if (n == 2u) { subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, (*acc)[2], 16u); }
  else { subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, (*acc)[3], 16u); }
  workgroupBarrier();
  var x: array<f32, 8>;
  let at = sg * SFRAG + (lane / 2u) * 16u + (lane % 2u) * 8u;
  for (var j = 0u; j < 8u; j++) { x[j] = scratch[at + j]; }
  workgroupBarrier();
  return x;
}

// Query rows [start, end) that see some key of the block at c0 (BR keys), start a
// multiple of TILE.
fn query_tiles(c0: u32, pad: u32) -> vec2u {
  var first = max(c0, pad);
  if (p.causal == 0u) { first = pad; }
  var start = 0u;
  if (first > p.q_offset) { start = ((first - p.q_offset) / TILE) * TILE; }
  var end = p.tq;
  if (c0 + BR <= pad || c0 >= p.s) { end = 0u; }
  return vec2u(start, end);
}

@compute @workgroup_size(THREADS)
fn backward_dkv_tensor(
  @builtin(workgroup_id) wid: vec3u,
  @builtin(local_invocation_index) li: u32,
  @builtin(subgroup_id) sg: u32,
  @builtin(subgroup_invocation_id) lane: u32,
) {
  let b = wid.z;
  let h = wid.y;
  let c0 = wid.x * BR;
  let hk = h / p.group;
  let kbase4 = (b * p.hkv + hk) * p.s_cap * HD4;
  let row0 = (b * p.hq + h) * p.tq;
  let pad = pad_of(b);
  let sig = sigma[0];
  stage_rows(li, 1u, kbase4, c0, BR, p.s, 0u, 1.0);
  workgroupBarrier();
  var kl = lefts(sg * 16u);
  workgroupBarrier();
  stage_rows(li, 2u, kbase4, c0, BR, p.s, 0u, 1.0);
  workgroupBarrier();
  var vl = lefts(sg * 16u);

  let key = c0 + sg * 16u + lane / 2u;      // this lane's key in the scalar steps
  let qc = (lane % 2u) * 16u;               // and its first query column of a tile
  let srow = sg * SFRAG + (lane / 2u) * TILE + qc;
  let prow = (sg * 16u + lane / 2u) * LDP + qc;
  var dk: Band;
  var dv: Band;
  let rows = query_tiles(c0, pad);
  for (var r0 = rows.x; r0 < rows.y; r0 += TILE) {
    workgroupBarrier();
    stage_rows(li, 0u, row0 * HD4, r0, TILE, p.tq, 0u, 1.0);
    stage_rows(li, 3u, row0 * HD4, r0, TILE, p.tq, TILE, sig);
    stage_stats(li, row0, r0, TILE);
    workgroupBarrier();
    products_t(&kl, sg, 0u);                 // S^T = K q^T
    workgroupBarrier();
    var pr: array<f32, 16>;
    for (var j = 0u; j < 16u; j++) {
      var x = 0.0;
      if (visible(r0 + qc + j, key, pad)) { x = exp(scratch[srow + j] * p.scale - row_lse[qc + j]); }
      pr[j] = x;
      tp_h[prow + j] = f16(x);
    }
    workgroupBarrier();
    products_t(&vl, sg, TILE);               // dP^T = V (sigma dO)^T
    workgroupBarrier();
    for (var j = 0u; j < 16u; j++) {
      tds_h[prow + j] = f16(pr[j] * (scratch[srow + j] - row_delta[qc + j]));
    }
    workgroupBarrier();
    accumulate(&dv, 0u, sg, TILE);           // P^T (sigma dO)
    accumulate(&dk, 1u, sg, 0u);             // (sigma dS)^T q
  }
  // One query head a kv head: dk and dv themselves; else this head's partials.
  let dst0 = (select((b * p.hq + h) * p.s, (b * p.hkv + hk) * p.s_cap, p.group == 1u) + key) * HD + (lane % 2u) * 8u;
  let mk = p.scale * sigma[1];
  workgroupBarrier();
  for (var n = 0u; n < HD / 16u; n++) {
    let x = lane_values(&dk, n, sg, lane);
    let y = lane_values(&dv, n, sg, lane);
    if (key < p.s) {
      for (var j = 0u; j < 8u; j++) {
        out_k[dst0 + n * 16u + j] = x[j] * mk;
        out_v[dst0 + n * 16u + j] = y[j] * sigma[1];
      }
    }
  }
}

@compute @workgroup_size(THREADS)
fn backward_dq_tensor(
  @builtin(workgroup_id) wid: vec3u,
  @builtin(local_invocation_index) li: u32,
  @builtin(subgroup_id) sg: u32,
  @builtin(subgroup_invocation_id) lane: u32,
) {
  let b = wid.z;
  let h = wid.y;
  let r0 = wid.x * BR;
  let row0 = (b * p.hq + h) * p.tq;
  let kbase4 = (b * p.hkv + h / p.group) * p.s_cap * HD4;
  let pad = pad_of(b);
  stage_rows(li, 0u, row0 * HD4, r0, BR, p.tq, 0u, 1.0);
  stage_stats(li, row0, r0, BR);
  workgroupBarrier();
  var ql = lefts(sg * 16u);
  workgroupBarrier();
  stage_rows(li, 3u, row0 * HD4, r0, BR, p.tq, 0u, sigma[0]);
  workgroupBarrier();
  var dol = lefts(sg * 16u);

  let qi = r0 + sg * 16u + lane / 2u;      // this lane's query row in the scalar steps
  let kc = (lane % 2u) * 16u;               // and its first key column of a tile
  let lse_r = row_lse[sg * 16u + lane / 2u];
  let delta_r = row_delta[sg * 16u + lane / 2u];
  let srow = sg * SFRAG + (lane / 2u) * TILE + kc;
  let prow = (sg * 16u + lane / 2u) * LDP + kc;
  var acc: Band;
  let range = key_range(r0, pad);
  for (var c0 = range.x; c0 < range.y; c0 += TILE) {
    workgroupBarrier();
    stage_rows(li, 1u, kbase4, c0, TILE, p.s, 0u, 1.0);
    stage_rows(li, 2u, kbase4, c0, TILE, p.s, TILE, 1.0);
    workgroupBarrier();
    products_t(&ql, sg, 0u);                 // S = q K^T
    workgroupBarrier();
    var pr: array<f32, 16>;
    for (var j = 0u; j < 16u; j++) {
      var x = 0.0;
      if (visible(qi, c0 + kc + j, pad)) { x = exp(scratch[srow + j] * p.scale - lse_r); }
      pr[j] = x;
    }
    workgroupBarrier();
    products_t(&dol, sg, TILE);              // dP = (sigma dO) V^T
    workgroupBarrier();
    for (var j = 0u; j < 16u; j++) {
      tds_h[prow + j] = f16(pr[j] * (scratch[srow + j] - delta_r));
    }
    workgroupBarrier();
    accumulate(&acc, 1u, sg, 0u);            // (sigma dS) K
  }
  let dst0 = (row0 + qi) * HD + (lane % 2u) * 8u;
  let mq = p.scale * sigma[1];
  workgroupBarrier();
  for (var n = 0u; n < HD / 16u; n++) {
    let x = lane_values(&acc, n, sg, lane);
    if (qi < p.tq) {
      for (var j = 0u; j < 8u; j++) { dq[dst0 + n * 16u + j] = x[j] * mq; }
    }
  }
}
