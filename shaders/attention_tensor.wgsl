// Flash attention forward on tensor cores, for passes that record no gradient
// (scoring, reference and teacher log-probs, prefill):
//   o = softmax(scale * q k^T + mask) v, and lse = the row log-sum-exp
// with the layout, masking, uniform and bindings of shaders/attention.wgsl's forward
// (q, o [B, Hq, Tq, HD]; k, v [B, Hkv, S_cap, HD]; lse [B, Hq, Tq]; pad_left [B]),
// rows without a visible key giving o = 0 and lse = 0.
//
// Precision: q, k, v and the unnormalised probabilities are rounded to f16 as they are
// staged into workgroup memory, products summed in f32 (as shaders/matmul/tensor.wgsl);
// the scale, the softmax, its sums and lse are f32. src/reference/attention.ts
// `attentionForwardF16` computes the same.
//
// Tiling: a workgroup owns BR = 16 * SGS query rows of one head; subgroup s owns rows
// 16 s .. 16 s + 15 of them. Key and value tiles of BC = 32 rows pass through workgroup
// memory, once. Subgroup matrices cannot be read element by element, so each tile's
// scores S = q k^T go through a 16 x BC f32 scratch of the subgroup; each row takes
// its probabilities against a reference max m, e = exp(S - m) rounded to f16 into a
// 16 x BC tile that multiplies into the value tile's HD / 16 accumulators of 16 x 16,
// and keeps the sum of e in f32. m moves only when a row's tile max passes it by more
// than GROW (so e stays under exp(GROW), well inside f16); then, and only then, the
// accumulators are rescaled by exp(m_old - m_new) a row, through the scratch (stored,
// scaled by the lanes, loaded back), for every subgroup at once since the barriers it
// needs are workgroup-wide. The output is divided by the sum as it is written.
// In the scalar steps lane l of a subgroup serves row l / 2, the half l % 2 of the
// tile's columns (and of an accumulator's); the two lanes of a row combine through
// subgroupShuffleXor.
//
// Needs `shader-f16`, `subgroups` and `chromium-experimental-subgroup-matrix` with a
// 16x16x16 f16 -> f32 configuration and subgroups of exactly 32 invocations
// (src/kernels/attention_tensor.ts checks). Subgroup-matrix calls sit in
// subgroup-uniform control flow: the key loop's bounds depend only on workgroup_id, the
// uniform and the batch row's padding, alike for every subgroup, and the barriers are
// workgroup-wide, reached by every subgroup the same number of times; whether to rescale
// is read through workgroupUniformLoad, so it is the same for all.

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
const GROW: f32 = 8.0;           // how far a row's max may pass its reference max

// #include "common/attention_mask.wgsl"

@group(0) @binding(1) var<storage, read> q4: array<vec4f>;
@group(0) @binding(2) var<storage, read> k4: array<vec4f>;
@group(0) @binding(3) var<storage, read> v4: array<vec4f>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

var<workgroup> tq_h: array<f16, BR * LD>;
var<workgroup> tk_h: array<f16, BC * LD>;
var<workgroup> tv_h: array<f16, BC * LD>;
// The last P row needs no padding after it, which leaves room for `moved` in 32 KiB at
// head dim 128 with two subgroups.
var<workgroup> tp_h: array<f16, SGS * 16u * LDP - PAD>;
// Scores of subgroup s at s * SFRAG, [16][BC]; or two 16 x 16 accumulators.
var<workgroup> scratch: array<f32, SGS * SFRAG>;
// Whether a row of subgroup s moved its reference max this tile (SGS is at most 4).
var<workgroup> moved: array<u32, 4>;

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

// Key and value rows c0 .. c0 + BC - 1 of the kv head whose row 0 is vec4 `base4`,
// zero past S.
fn load_kv(li: u32, base4: u32, c0: u32) {
  for (var e = li; e < BC * HD4; e += THREADS) {
    let r = e / HD4;
    let c = e % HD4;
    var kx = vec4f(0.0);
    var vx = vec4f(0.0);
    if (c0 + r < p.s) {
      kx = k4[base4 + (c0 + r) * HD4 + c];
      vx = v4[base4 + (c0 + r) * HD4 + c];
    }
    let at = r * LD + c * 4u;
    let kh = vec4<f16>(kx);
    tk_h[at] = kh.x;
    tk_h[at + 1u] = kh.y;
    tk_h[at + 2u] = kh.z;
    tk_h[at + 3u] = kh.w;
    let vh = vec4<f16>(vx);
    tv_h[at] = vh.x;
    tv_h[at + 1u] = vh.y;
    tv_h[at + 2u] = vh.z;
    tv_h[at + 3u] = vh.w;
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

// Where the 8 elements of a row-major 16 x 16 block that lane `lane` serves begin: its
// row lane / 2, the half lane % 2 of the columns.
fn lane_slice(lane: u32) -> u32 { return (lane / 2u) * 16u + (lane % 2u) * 8u; }

// One accumulator with each row times its lanes' `alpha`, through the subgroup's
// scratch at `half` (0 or 256: consecutive calls alternate, so a load never races the
// next store).
fn rescaled(acc: Result, sg: u32, lane: u32, alpha: f32, half: u32) -> Result {
  let base = sg * SFRAG + half;
  subgroupMatrixStore<row_major>(&scratch, base, acc, 16u);
  workgroupBarrier();
  let at = base + lane_slice(lane);
  for (var j = 0u; j < 8u; j++) { scratch[at + j] *= alpha; }
  workgroupBarrier();
  return subgroupMatrixLoad<Result, row_major>(&scratch, base, 16u);
}

// Output columns col .. col + 15 of the lane's row qi, times `inv` (1 / the row's sum),
// through the subgroup's scratch; rows past Tq left alone.
fn emit(acc: Result, sg: u32, lane: u32, qi: u32, row0: u32, col: u32, inv: f32) {
  subgroupMatrixStore<row_major>(&scratch, sg * SFRAG, acc, 16u);
  workgroupBarrier();
  if (qi < p.tq) {
    let at = sg * SFRAG + lane_slice(lane);
    let out = (row0 + qi) * HD + col + (lane % 2u) * 8u;
    for (var j = 0u; j < 8u; j++) { o[out + j] = scratch[at + j] * inv; }
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
  let prow = (sg * 16u + lane / 2u) * LDP + col0;

  var m = MASKED;     // the row's reference max
  var l = 0.0;        // the row's sum of exp(score - m)
  var lo: Band;
  var hi: Band;
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    load_kv(li, kbase4, c0);
    workgroupBarrier();
    scores(sg);
    workgroupBarrier();
    // A tile wholly inside the row's keys needs no test a key.
    let inside = sees_all(qi, c0, BC, pad);
    var sc: array<f32, 16>;
    var seen = 0u;
    var mx = MASKED;
    for (var j = 0u; j < BC / 2u; j++) {
      if (inside || visible(qi, c0 + col0 + j, pad)) {
        sc[j] = scratch[srow + j] * p.scale;
        seen |= 1u << j;
        mx = max(mx, sc[j]);
      }
    }
    mx = max(mx, subgroupShuffleXor(mx, 1u));
    let moves = mx > m + GROW;
    let mn = select(m, mx, moves);
    let alpha = exp(m - mn);
    var sum = 0.0;
    for (var j = 0u; j < BC / 2u; j++) {
      var e = 0.0;
      if ((seen & (1u << j)) != 0u) { e = exp(sc[j] - mn); }
      tp_h[prow + j] = f16(e);
      sum += e;
    }
    sum += subgroupShuffleXor(sum, 1u);
    l = l * alpha + sum;
    m = mn;
    // Before a row's first visible tile its accumulators hold nothing to rescale.
    let grew = subgroupAny(moves && c0 > range.x);
    if (lane == 0u) { moved[sg] = u32(grew); }
    let any = workgroupUniformLoad(&moved);
    if ((any[0] | any[1] | any[2] | any[3]) != 0u) {
      lo[0] = rescaled(lo[0], sg, lane, alpha, 0u);
      if (HD > 16u) { lo[1] = rescaled(lo[1], sg, lane, alpha, 256u); }
      if (HD > 32u) { lo[2] = rescaled(lo[2], sg, lane, alpha, 0u); }
      if (HD > 48u) { lo[3] = rescaled(lo[3], sg, lane, alpha, 256u); }
      if (HD > 64u) { hi[0] = rescaled(hi[0], sg, lane, alpha, 0u); }
      if (HD > 80u) { hi[1] = rescaled(hi[1], sg, lane, alpha, 256u); }
      if (HD > 96u) { hi[2] = rescaled(hi[2], sg, lane, alpha, 0u); }
      if (HD > 112u) { hi[3] = rescaled(hi[3], sg, lane, alpha, 256u); }
    }
    accumulate_pv(sg, &lo, &hi);
  }

  let inv = select(0.0, 1.0 / l, l > 0.0);
  workgroupBarrier();
  emit(lo[0], sg, lane, qi, row0, 0u, inv);
  if (HD > 16u) { emit(lo[1], sg, lane, qi, row0, 16u, inv); }
  if (HD > 32u) { emit(lo[2], sg, lane, qi, row0, 32u, inv); }
  if (HD > 48u) { emit(lo[3], sg, lane, qi, row0, 48u, inv); }
  if (HD > 64u) { emit(hi[0], sg, lane, qi, row0, 64u, inv); }
  if (HD > 80u) { emit(hi[1], sg, lane, qi, row0, 80u, inv); }
  if (HD > 96u) { emit(hi[2], sg, lane, qi, row0, 96u, inv); }
  if (HD > 112u) { emit(hi[3], sg, lane, qi, row0, 112u, inv); }
  if (lane % 2u == 0u && qi < p.tq) { lse[row0 + qi] = select(0.0, m + log(l), l > 0.0); }
}
