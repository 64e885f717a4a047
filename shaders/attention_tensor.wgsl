// Flash attention forward on tensor cores, for passes that record no gradient
// (scoring, reference and teacher log-probs, prefill):
//   o = softmax(scale * q k^T + mask) v, and lse = the row log-sum-exp
// with the layout, masking, uniform and bindings of shaders/attention.wgsl's forward
// (q, o [B, Hq, Tq, HD]; k, v [B, Hkv, S_cap, HD]; lse [B, Hq, Tq]; pad_left [B]),
// rows without a visible key giving o = 0 and lse = 0.
//
// Precision: q, k, v and the probabilities are rounded to f16 as they are staged into
// workgroup memory, products summed in f32 (as shaders/matmul/tensor.wgsl); the scale,
// the softmax and lse are f32. src/reference/attention_f16.ts computes the same.
//
// Tiling: a workgroup owns BR = 16 * SGS query rows of one head; subgroup s owns rows
// 16 s .. 16 s + 15 of them. Key tiles of BC = 32 rows pass through workgroup memory.
// Subgroup matrices cannot be read element by element, so scores go through a 16 x BC
// f32 scratch of the subgroup, and the softmax takes two sweeps over the keys rather
// than rescaling the output as it goes: the first computes S = q k^T a tile at a time
// and keeps each row's running max and sum, the second computes S again, the
// probabilities P = exp(S - lse) (final, so no rescaling), rounds them to f16 into a
// 16 x BC tile of the subgroup and adds P v into HD / 16 accumulators of 16 x 16. The
// second q k^T costs HD / 16 * 2 products a tile against the 4 * HD / 16 of the rest.
// In the scalar steps lane l of a subgroup serves row l / 2, the half l % 2 of the
// tile's columns; the two lanes of a row combine through subgroupShuffleXor.
//
// Needs `shader-f16`, `subgroups` and `chromium-experimental-subgroup-matrix` with a
// 16x16x16 f16 -> f32 configuration and subgroups of exactly 32 invocations
// (src/kernels/attention_tensor.ts checks). Subgroup-matrix calls sit in
// subgroup-uniform control flow: the key loop's bounds depend only on workgroup_id, the
// uniform and the batch row's padding, alike for every subgroup, and the barriers are
// workgroup-wide, reached by every subgroup the same number of times.

enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

override HD: u32 = 64u;          // a multiple of 16, at most 128
override SGS: u32 = 4u;          // subgroups a workgroup
const SUBGROUP: u32 = 32u;
const BC: u32 = 32u;
const PAD: u32 = 8u;             // halves of padding a stored row (16-byte aligned rows)
override BR: u32 = 16u * SGS;
override THREADS: u32 = SUBGROUP * SGS;
override HD4: u32 = HD / 4u;
override LD: u32 = HD + PAD;     // halves from one stored q, k or v row to the next
const LDP: u32 = BC + PAD;       // halves from one stored P row to the next
const SFRAG: u32 = 16u * BC;     // floats of a subgroup's score scratch

// #include "common/attention_mask.wgsl"

@group(0) @binding(1) var<storage, read> q4: array<vec4f>;
@group(0) @binding(2) var<storage, read> k4: array<vec4f>;
@group(0) @binding(3) var<storage, read> v4: array<vec4f>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

var<workgroup> tq_h: array<f16, BR * LD>;
var<workgroup> tk_h: array<f16, BC * LD>;
var<workgroup> tv_h: array<f16, BC * LD>;
var<workgroup> tp_h: array<f16, SGS * 16u * LDP>;
// Scores of subgroup s at s * SFRAG, [16][BC]; at the end one 16 x 16 output block.
var<workgroup> scratch: array<f32, SGS * SFRAG>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Result = subgroup_matrix_result<f32, 16, 16>;
// Output accumulators of 16 columns each: 4 for head dims up to 64, 8 up to 128. Two
// bands indexed by constants, so no compiler has a reason to put them in memory.
alias Band = array<Result, 4>;

// Query rows r0 .. r0 + BR - 1 of the head whose row 0 is vec4 `base4`, zero past Tq.
fn load_q(li: u32, base4: u32, r0: u32) {
  for (var e = li; e < BR * HD4; e += THREADS) {
    let r = e / HD4;
    let c = e % HD4;
    var x = vec4f(0.0);
    if (r0 + r < p.tq) { x = q4[base4 + (r0 + r) * HD4 + c]; }
    let h = vec4<f16>(x);
    let at = r * LD + c * 4u;
    tq_h[at] = h.x;
    tq_h[at + 1u] = h.y;
    tq_h[at + 2u] = h.z;
    tq_h[at + 3u] = h.w;
  }
}

// Key rows c0 .. c0 + BC - 1 of the kv head whose row 0 is vec4 `base4` (and the value
// rows with `values`), zero past S.
fn load_kv(li: u32, base4: u32, c0: u32, values: bool) {
  for (var e = li; e < BC * HD4; e += THREADS) {
    let r = e / HD4;
    let c = e % HD4;
    var kx = vec4f(0.0);
    var vx = vec4f(0.0);
    if (c0 + r < p.s) {
      kx = k4[base4 + (c0 + r) * HD4 + c];
      if (values) { vx = v4[base4 + (c0 + r) * HD4 + c]; }
    }
    let at = r * LD + c * 4u;
    let kh = vec4<f16>(kx);
    tk_h[at] = kh.x;
    tk_h[at + 1u] = kh.y;
    tk_h[at + 2u] = kh.z;
    tk_h[at + 3u] = kh.w;
    if (values) {
      let vh = vec4<f16>(vx);
      tv_h[at] = vh.x;
      tv_h[at + 1u] = vh.y;
      tv_h[at + 2u] = vh.z;
      tv_h[at + 3u] = vh.w;
    }
  }
}

// The subgroup's 16 x BC block of q k^T (unscaled) into its scratch.
fn scores(sg: u32) {
  var s0: Result;
  var s1: Result;
  for (var kk = 0u; kk < HD; kk += 16u) {
    let a = subgroupMatrixLoad<Left, row_major>(&tq_h, sg * 16u * LD + kk, LD);
    // k stored [key][d] is the right operand k^T read column-major.
    s0 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, col_major>(&tk_h, kk, LD), s0);
    s1 = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, col_major>(&tk_h, 16u * LD + kk, LD), s1);
  }
  subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, s0, BC);
  subgroupMatrixStore<row_major>(&scratch, sg * SFRAG + 16u, s1, BC);
}

// P (16 x BC of the subgroup) times the value tile into the output accumulators.
fn accumulate_pv(sg: u32, lo: ptr<function, Band>, hi: ptr<function, Band>) {
  for (var kk = 0u; kk < BC; kk += 16u) {
    let a = subgroupMatrixLoad<Left, row_major>(&tp_h, sg * 16u * LDP + kk, LDP);
    let at = kk * LD;
    (*lo)[0] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at, LD), (*lo)[0]);
    if (HD > 16u) { (*lo)[1] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 16u, LD), (*lo)[1]); }
    if (HD > 32u) { (*lo)[2] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 32u, LD), (*lo)[2]); }
    if (HD > 48u) { (*lo)[3] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 48u, LD), (*lo)[3]); }
    if (HD > 64u) { (*hi)[0] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 64u, LD), (*hi)[0]); }
    if (HD > 80u) { (*hi)[1] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 80u, LD), (*hi)[1]); }
    if (HD > 96u) { (*hi)[2] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 96u, LD), (*hi)[2]); }
    if (HD > 112u) { (*hi)[3] = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<Right, row_major>(&tv_h, at + 112u, LD), (*hi)[3]); }
  }
}

// Output columns col .. col + 15 of the subgroup's rows, through its scratch, rows
// past Tq left alone.
fn emit(acc: Result, sg: u32, lane: u32, r0: u32, row0: u32, col: u32) {
  subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, acc, 16u);
  workgroupBarrier();
  for (var e = lane; e < 256u; e += SUBGROUP) {
    let r = r0 + sg * 16u + e / 16u;
    if (r < p.tq) { o[(row0 + r) * HD + col + e % 16u] = scratch[sg * SFRAG + e]; }
  }
  workgroupBarrier();
}

@compute @workgroup_size(THREADS)
fn forward_tensor(
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
  let range = key_range(r0, pad);
  load_q(li, row0 * HD4, r0);
  let qi = r0 + sg * 16u + lane / 2u;          // this lane's query row of the head
  let col0 = (lane % 2u) * (BC / 2u);          // and its first column of a tile
  let srow = sg * SFRAG + (lane / 2u) * BC + col0;

  // Sweep 1: each row's max and sum of exp(score - max).
  var m = MASKED;
  var l = 0.0;
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    load_kv(li, kbase4, c0, false);
    workgroupBarrier();
    scores(sg);
    workgroupBarrier();
    var mx = MASKED;
    for (var j = 0u; j < BC / 2u; j++) {
      if (visible(qi, c0 + col0 + j, pad)) { mx = max(mx, scratch[srow + j] * p.scale); }
    }
    mx = max(mx, subgroupShuffleXor(mx, 1u));
    let mn = max(m, mx);
    var sum = 0.0;
    for (var j = 0u; j < BC / 2u; j++) {
      if (visible(qi, c0 + col0 + j, pad)) { sum += exp(scratch[srow + j] * p.scale - mn); }
    }
    sum += subgroupShuffleXor(sum, 1u);
    l = l * exp(m - mn) + sum;
    m = mn;
  }
  let seen = l > 0.0;
  let row_lse = select(0.0, m + log(l), seen);

  // Sweep 2: P = exp(score - lse) into f16, P v into the accumulators.
  var lo: Band;
  var hi: Band;
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    load_kv(li, kbase4, c0, true);
    workgroupBarrier();
    scores(sg);
    workgroupBarrier();
    let prow = (sg * 16u + lane / 2u) * LDP + col0;
    for (var j = 0u; j < BC / 2u; j++) {
      var pr = 0.0;
      if (seen && visible(qi, c0 + col0 + j, pad)) { pr = exp(scratch[srow + j] * p.scale - row_lse); }
      tp_h[prow + j] = f16(pr);
    }
    workgroupBarrier();
    accumulate_pv(sg, &lo, &hi);
  }

  workgroupBarrier();
  emit(lo[0], sg, lane, r0, row0, 0u);
  if (HD > 16u) { emit(lo[1], sg, lane, r0, row0, 16u); }
  if (HD > 32u) { emit(lo[2], sg, lane, r0, row0, 32u); }
  if (HD > 48u) { emit(lo[3], sg, lane, r0, row0, 48u); }
  if (HD > 64u) { emit(hi[0], sg, lane, r0, row0, 64u); }
  if (HD > 80u) { emit(hi[1], sg, lane, r0, row0, 80u); }
  if (HD > 96u) { emit(hi[2], sg, lane, r0, row0, 96u); }
  if (HD > 112u) { emit(hi[3], sg, lane, r0, row0, 112u); }
  if (lane % 2u == 0u && qi < p.tq) { lse[row0 + qi] = row_lse; }
}
