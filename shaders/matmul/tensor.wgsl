// Batched matrix multiply on tensor cores: f16 subgroup matrices, f32 accumulation.
//   C[b] = op(A[b]) @ op(B[b]) + bias            (C[b] += ... with ACCUM)
// Layouts and sizes as in common/matmul_params.wgsl; A, B, C and bias are f32.
//
// With B_HALF, B holds f16 values already (a decode step's weight copies,
// tensor/ops/half.ts: u32 words of two halves, element 2j in word j's low 16 bits),
// still bound as vec4s, so 8 elements to a vec4 and offsets, strides and sizes in
// elements: half the bytes of an f32 B, and the same product as an f32 B of those
// values.
//
// Precision: A and B are rounded to f16 as they are staged into workgroup memory
// (WGSL lets an implementation pick either neighbour; NVIDIA's conversion rounds to
// nearest even, which src/reference/matmul_f16.ts assumes). A product of two f16
// values is exact in f32 and the tensor cores sum in f32, so the result is the
// product of the f16-rounded operands, about 2^-11 relative per operand from the f32
// kernel. Operands of magnitude 65536 and up become infinite (WGSL allows that from
// past 65504), those of at most 2^-25 become zero: callers scale where that can
// happen (gradients). With SCALE_A, A is multiplied by scale[0] before it is rounded
// and each result by scale[1] before bias and accumulation: a power of two and its
// inverse (shaders/grad_scale.wgsl), so both are exact and only A's rounding changes.
// SCALE_A needs the staged epilogue (`main_staged`), where each element passes
// through a scalar.
//
// Needs `shader-f16`, `subgroups` and `chromium-experimental-subgroup-matrix` with a
// 16x16x16 f16 -> f32 configuration, and subgroups of exactly 32 invocations, which
// the launcher (src/kernels/matmul/tensor.ts) checks: the workgroup is 32 * SG_M *
// SG_N invocations and must be exactly SG_M * SG_N subgroups.
//
// Tiling: a workgroup owns a BM x BN tile of C (BM = 16 FM SG_M, BN = 16 FN SG_N).
// Subgroup s owns the WM x WN = 16 FM x 16 FN block at row (s / SG_N) WM, column
// (s % SG_N) WN of it, as FM x FN 16x16 f32 accumulators (subgroup matrices, which
// live in the subgroup's registers). K advances BK at a time through two
// workgroup-memory stages of f16: the next slice is loaded from global memory into
// registers (f32 vec4s along each operand's contiguous dimension, zero outside the
// matrices, so partial tiles and a partial last slice add nothing) before the
// current stage is multiplied, and is converted and written to the other stage
// after, so global latency overlaps the tensor-core work and each slice costs one
// barrier. Each 16-deep step loads the subgroup's FN right fragments once and each
// left fragment once, and issues FM x FN multiply-accumulates.
//
// Workgroup tiles keep the global layout (A as [m][k] or [k][m], B as [k][n] or
// [n][k]) so staging writes runs of the contiguous dimension; fragment loads read
// them row- or column-major accordingly. Rows are padded by 8 halves (16 bytes):
// Vulkan requires a cooperative-matrix load's rows to start 16-byte aligned, and with
// the pad 8 consecutive rows of a fragment start in 8 distinct 16-byte groups of the
// 128 bytes of banks (unpadded rows of 64 or 256 bytes would start in one or two).
//
// Entry points differ in the epilogue. `main_staged` passes each accumulator through
// a 16x16 f32 scratch of its subgroup in workgroup memory, from which the subgroup's
// lanes write the elements inside C, with bias and accumulation. `main` stores the
// accumulators of a tile wholly inside C straight to C (with ACCUM they start from
// C's values instead of zero) and only edge tiles through scratch; the launcher takes
// it without bias, when C's rows, offset and batch stride are multiples of 4 floats
// (the same 16-byte rule) and C's buffer holds at least one 16x16 f32 block (Dawn
// requires that of any buffer a subgroup matrix is loaded from or stored to, and
// only `main` does that with C).
//
// Subgroup-matrix calls must be in subgroup-uniform control flow with
// subgroup-uniform operands: every branch around them depends only on override
// constants, workgroup_id and the uniform parameters, and the fragment offsets on
// subgroup_id (Dawn's subgroup_uniformity analysis accepts that).
//
// With SPLIT (one batch), workgroup z multiplies only k = z p.k_split .. (z + 1)
// p.k_split - 1 (whole K slices) and writes that partial product to batch z of C, for
// split_k_sum (shaders/matmul/tiled.wgsl) to add up with the epilogue: a decode
// step's 128-row output of 896 columns is 28 tiles, which walking all of a 4,864-long
// k alone leave the GPU mostly idle.
//
// Workgroups walk output tiles in groups of GROUP_M tile rows (as in tiled.wgsl), so
// those running at once share A and B panels in L2. One dispatch covers tile_count
// tiles from tile_base on, so the launcher can spread a grid over several. The loads
// keep their own form here (early returns): the one-return form of tiled.wgsl was
// measured on the f32 kernel only.

enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

// #include "common/matmul_params.wgsl"

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override VEC_A: bool = false;    // A's rows, offset and batch stride are multiples of 4 floats
override VEC_B: bool = false;
override BIAS: bool = false;
override ACCUM: bool = false;
override SCALE_A: bool = false;
override B_HALF: bool = false;   // B is f16 pairs (see above)
override SPLIT: bool = false;    // workgroup z walks run z of k (p.k_split long) into batch z of C
override WHOLE: bool = false;    // M, N, K multiples of BM, BN, BK: no load bounds checks
override SG_M: u32 = 2u;         // subgroups along M
override SG_N: u32 = 4u;         // subgroups along N
override FM: u32 = 4u;           // 16-row fragments per subgroup (1-4)
override FN: u32 = 2u;           // 16-column fragments per subgroup (1-4)
override BK: u32 = 32u;          // K slice per stage (a multiple of 16)

const SUBGROUP = 32u;
const PAD = 8u;
const FRAG = 256u;               // elements of a 16x16 fragment

override SUBGROUPS = SG_M * SG_N;
override THREADS = SUBGROUP * SUBGROUPS;
override WM = 16u * FM;
override WN = 16u * FN;
override BM = WM * SG_M;
override BN = WN * SG_N;
// A slice as stored: rows x cols, cols being the contiguous dimension.
override A_ROWS = select(BM, BK, TRANS_A);
override A_COLS = select(BK, BM, TRANS_A);
override B_ROWS = select(BK, BN, TRANS_B);
override B_COLS = select(BN, BK, TRANS_B);
override LDA = A_COLS + PAD;                 // halves from one stored row to the next
override LDB = B_COLS + PAD;
override A_STAGE = A_ROWS * LDA;
override B_STAGE = B_ROWS * LDB;
override A_Q = A_COLS / 4u;                  // vec4s along a stored row
override B_Q = B_COLS / 4u;
override LOADS_A = A_ROWS * A_Q / THREADS;   // vec4 loads per invocation per slice (1-8)
override LOADS_B = B_ROWS * B_Q / THREADS;

@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;
// [A's scale, the result's] under SCALE_A; any buffer otherwise.
@group(0) @binding(5) var<storage, read> scale: array<f32>;

// Stage s of an operand starts s * A_STAGE (B_STAGE) halves in.
var<workgroup> tile_a: array<f16, 2u * A_STAGE>;
var<workgroup> tile_b: array<f16, 2u * B_STAGE>;
// One 16x16 block per subgroup on its way out (`main_staged`, and `main`'s edge tiles).
var<workgroup> scratch: array<f32, SUBGROUPS * FRAG>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Result = subgroup_matrix_result<f32, 16, 16>;
// The accumulators of one 16-row band of a subgroup's block (FN of the 4 in use). Four
// separate bands, always indexed by constants, rather than one array indexed by a
// loop counter, so that no compiler has a reason to put them in memory.
alias Band = array<Result, 4>;

struct Place {
  base_a: u32,      // element offsets of this batch
  base_b: u32,
  base_c: u32,
  m0: u32,          // tile origin in C
  n0: u32,
  k0: u32,          // first k of this workgroup's run (0 without SPLIT)
  steps: u32,       // K slices of the run
}

// One K slice in flight, up to 8 vec4s of each operand per invocation.
struct Staged {
  a: array<vec4f, 8>,
  b: array<vec4f, 8>,
}

// The tile of this workgroup, or false when the folded grid's workgroup has none.
fn place(wid: vec3u, nwg: vec3u, at: ptr<function, Place>) -> bool {
  let i = wid.y * nwg.x + wid.x;
  if (i >= p.tile_count) { return false; }
  let tile = p.tile_base + i;
  let per_group = GROUP_M * p.tiles_n;
  let first_m = (tile / per_group) * GROUP_M;
  let group_m = min(p.tiles_m - first_m, GROUP_M);
  let in_group = tile % per_group;
  let batch = p.batch_base + wid.z;
  // Under SPLIT, z is the run: every run reads the one batch of A and B.
  let operands = select(batch, 0u, SPLIT);
  (*at).base_a = p.offset_a + operands * p.stride_a;
  (*at).base_b = p.offset_b + operands * p.stride_b;
  (*at).base_c = p.offset_c + batch * p.stride_c;
  (*at).m0 = (first_m + in_group % group_m) * BM;
  (*at).n0 = (in_group / group_m) * BN;
  (*at).k0 = select(0u, wid.z * p.k_split, SPLIT);
  let k_end = select(p.k, min((*at).k0 + p.k_split, p.k), SPLIT);
  (*at).steps = (k_end - min((*at).k0, k_end) + BK - 1u) / BK;
  return true;
}

// Elements (row, col..col+3) of the row-major [rows, cols] matrix at `base` in A,
// zero outside it.
fn fetch_a(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (!WHOLE && row >= rows) { return v; }
  let i = base + row * cols + col;
  if (VEC_A) {
    if (WHOLE || col < cols) { v = a[i / 4u]; }
    return v;
  }
  for (var j = 0u; j < 4u; j++) {
    if (WHOLE || col + j < cols) { v[j] = a[(i + j) / 4u][(i + j) % 4u]; }
  }
  return v;
}

// Element e of a B_HALF operand.
fn half_b(e: u32) -> f32 {
  let pair = unpack2x16float(bitcast<u32>(b[e / 8u][(e / 2u) % 4u]));
  return select(pair.x, pair.y, e % 2u == 1u);
}

fn fetch_b(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (!WHOLE && row >= rows) { return v; }
  let i = base + row * cols + col;
  if (B_HALF) {
    if (VEC_B) {
      // Four halves are two words: one half of a vec4.
      if (WHOLE || col < cols) {
        let q = bitcast<vec4u>(b[i / 8u]);
        let w = select(q.xy, q.zw, (i / 4u) % 2u == 1u);
        v = vec4f(unpack2x16float(w.x), unpack2x16float(w.y));
      }
      return v;
    }
    for (var j = 0u; j < 4u; j++) {
      if (WHOLE || col + j < cols) { v[j] = half_b(i + j); }
    }
    return v;
  }
  if (VEC_B) {
    if (WHOLE || col < cols) { v = b[i / 4u]; }
    return v;
  }
  for (var j = 0u; j < 4u; j++) {
    if (WHOLE || col + j < cols) { v[j] = b[(i + j) / 4u][(i + j) % 4u]; }
  }
  return v;
}

// Load u of the A slice starting at k0: 4 elements along a stored row, consecutive
// loads (invocations) taking consecutive vec4s of a row.
fn load_a(at: Place, k0: u32, u: u32) -> vec4f {
  let row = u / A_Q;
  let col = (u % A_Q) * 4u;
  if (TRANS_A) { return fetch_a(at.base_a, k0 + row, at.m0 + col, p.k, p.m); }
  return fetch_a(at.base_a, at.m0 + row, k0 + col, p.m, p.k);
}

fn load_b(at: Place, k0: u32, u: u32) -> vec4f {
  let row = u / B_Q;
  let col = (u % B_Q) * 4u;
  if (TRANS_B) { return fetch_b(at.base_b, at.n0 + row, k0 + col, p.n, p.k); }
  return fetch_b(at.base_b, k0 + row, at.n0 + col, p.k, p.n);
}

// Load u, rounded to f16 (A scaled first under SCALE_A), into stage s at the same
// place in the stored layout.
fn put_a(s: u32, u: u32, v: vec4f) {
  let i = s * A_STAGE + (u / A_Q) * LDA + (u % A_Q) * 4u;
  var x = v;
  if (SCALE_A) { x *= scale[0]; }
  let h = vec4<f16>(x);
  tile_a[i] = h.x;
  tile_a[i + 1u] = h.y;
  tile_a[i + 2u] = h.z;
  tile_a[i + 3u] = h.w;
}

fn put_b(s: u32, u: u32, v: vec4f) {
  let i = s * B_STAGE + (u / B_Q) * LDB + (u % B_Q) * 4u;
  let h = vec4<f16>(v);
  tile_b[i] = h.x;
  tile_b[i + 1u] = h.y;
  tile_b[i + 2u] = h.z;
  tile_b[i + 3u] = h.w;
}

// Unrolled by hand (the LOADS conditions are constants) so the staged vec4s stay in
// registers.
fn load_slice(at: Place, k0: u32, li: u32, r: ptr<function, Staged>) {
  (*r).a[0] = load_a(at, k0, li);
  if (LOADS_A > 1u) { (*r).a[1] = load_a(at, k0, li + THREADS); }
  if (LOADS_A > 2u) { (*r).a[2] = load_a(at, k0, li + 2u * THREADS); }
  if (LOADS_A > 3u) { (*r).a[3] = load_a(at, k0, li + 3u * THREADS); }
  if (LOADS_A > 4u) { (*r).a[4] = load_a(at, k0, li + 4u * THREADS); }
  if (LOADS_A > 5u) { (*r).a[5] = load_a(at, k0, li + 5u * THREADS); }
  if (LOADS_A > 6u) { (*r).a[6] = load_a(at, k0, li + 6u * THREADS); }
  if (LOADS_A > 7u) { (*r).a[7] = load_a(at, k0, li + 7u * THREADS); }
  (*r).b[0] = load_b(at, k0, li);
  if (LOADS_B > 1u) { (*r).b[1] = load_b(at, k0, li + THREADS); }
  if (LOADS_B > 2u) { (*r).b[2] = load_b(at, k0, li + 2u * THREADS); }
  if (LOADS_B > 3u) { (*r).b[3] = load_b(at, k0, li + 3u * THREADS); }
  if (LOADS_B > 4u) { (*r).b[4] = load_b(at, k0, li + 4u * THREADS); }
  if (LOADS_B > 5u) { (*r).b[5] = load_b(at, k0, li + 5u * THREADS); }
  if (LOADS_B > 6u) { (*r).b[6] = load_b(at, k0, li + 6u * THREADS); }
  if (LOADS_B > 7u) { (*r).b[7] = load_b(at, k0, li + 7u * THREADS); }
}

fn store_slice(s: u32, li: u32, r: ptr<function, Staged>) {
  put_a(s, li, (*r).a[0]);
  if (LOADS_A > 1u) { put_a(s, li + THREADS, (*r).a[1]); }
  if (LOADS_A > 2u) { put_a(s, li + 2u * THREADS, (*r).a[2]); }
  if (LOADS_A > 3u) { put_a(s, li + 3u * THREADS, (*r).a[3]); }
  if (LOADS_A > 4u) { put_a(s, li + 4u * THREADS, (*r).a[4]); }
  if (LOADS_A > 5u) { put_a(s, li + 5u * THREADS, (*r).a[5]); }
  if (LOADS_A > 6u) { put_a(s, li + 6u * THREADS, (*r).a[6]); }
  if (LOADS_A > 7u) { put_a(s, li + 7u * THREADS, (*r).a[7]); }
  put_b(s, li, (*r).b[0]);
  if (LOADS_B > 1u) { put_b(s, li + THREADS, (*r).b[1]); }
  if (LOADS_B > 2u) { put_b(s, li + 2u * THREADS, (*r).b[2]); }
  if (LOADS_B > 3u) { put_b(s, li + 3u * THREADS, (*r).b[3]); }
  if (LOADS_B > 4u) { put_b(s, li + 4u * THREADS, (*r).b[4]); }
  if (LOADS_B > 5u) { put_b(s, li + 5u * THREADS, (*r).b[5]); }
  if (LOADS_B > 6u) { put_b(s, li + 6u * THREADS, (*r).b[6]); }
  if (LOADS_B > 7u) { put_b(s, li + 7u * THREADS, (*r).b[7]); }
}

// Rows row..row+15 of op(A) in stage s, k = kk..kk+15 of the slice. Stored [m][k]
// that is a row-major 16x16 block; stored [k][m] a column-major one.
fn left(s: u32, row: u32, kk: u32) -> Left {
  if (TRANS_A) { return subgroupMatrixLoad<Left, col_major>(&tile_a, s * A_STAGE + kk * LDA + row, LDA); }
  return subgroupMatrixLoad<Left, row_major>(&tile_a, s * A_STAGE + row * LDA + kk, LDA);
}

// k = kk..kk+15 of the slice by columns col..col+15 of op(B) in stage s.
fn right(s: u32, kk: u32, col: u32) -> Right {
  if (TRANS_B) { return subgroupMatrixLoad<Right, col_major>(&tile_b, s * B_STAGE + col * LDB + kk, LDB); }
  return subgroupMatrixLoad<Right, row_major>(&tile_b, s * B_STAGE + kk * LDB + col, LDB);
}

fn mma_band(l: Left, r: ptr<function, array<Right, 4>>, acc: ptr<function, Band>) {
  (*acc)[0] = subgroupMatrixMultiplyAccumulate(l, (*r)[0], (*acc)[0]);
  if (FN > 1u) { (*acc)[1] = subgroupMatrixMultiplyAccumulate(l, (*r)[1], (*acc)[1]); }
  if (FN > 2u) { (*acc)[2] = subgroupMatrixMultiplyAccumulate(l, (*r)[2], (*acc)[2]); }
  if (FN > 3u) { (*acc)[3] = subgroupMatrixMultiplyAccumulate(l, (*r)[3], (*acc)[3]); }
}

// One 16-deep step of stage s for the subgroup's block at (wm, wn) of the tile.
fn mma_step(
  s: u32, kk: u32, wm: u32, wn: u32,
  acc0: ptr<function, Band>, acc1: ptr<function, Band>, acc2: ptr<function, Band>, acc3: ptr<function, Band>,
) {
  var r: array<Right, 4>;
  r[0] = right(s, kk, wn);
  if (FN > 1u) { r[1] = right(s, kk, wn + 16u); }
  if (FN > 2u) { r[2] = right(s, kk, wn + 32u); }
  if (FN > 3u) { r[3] = right(s, kk, wn + 48u); }
  mma_band(left(s, wm, kk), &r, acc0);
  if (FM > 1u) { mma_band(left(s, wm + 16u, kk), &r, acc1); }
  if (FM > 2u) { mma_band(left(s, wm + 32u, kk), &r, acc2); }
  if (FM > 3u) { mma_band(left(s, wm + 48u, kk), &r, acc3); }
}

// Element offset in C of (row, col) of this workgroup's tile.
fn c_at(at: Place, row: u32, col: u32) -> u32 {
  return at.base_c + (at.m0 + row) * p.n + at.n0 + col;
}

// `main` with ACCUM: the band's accumulators start as C's values.
fn start_band(at: Place, row: u32, wn: u32, acc: ptr<function, Band>) {
  let o = c_at(at, row, wn);
  (*acc)[0] = subgroupMatrixLoad<Result, row_major>(&c, o, p.n);
  if (FN > 1u) { (*acc)[1] = subgroupMatrixLoad<Result, row_major>(&c, o + 16u, p.n); }
  if (FN > 2u) { (*acc)[2] = subgroupMatrixLoad<Result, row_major>(&c, o + 32u, p.n); }
  if (FN > 3u) { (*acc)[3] = subgroupMatrixLoad<Result, row_major>(&c, o + 48u, p.n); }
}

fn store_band(at: Place, row: u32, wn: u32, acc: ptr<function, Band>) {
  let o = c_at(at, row, wn);
  subgroupMatrixStore<row_major>(&c, o, (*acc)[0], p.n);
  if (FN > 1u) { subgroupMatrixStore<row_major>(&c, o + 16u, (*acc)[1], p.n); }
  if (FN > 2u) { subgroupMatrixStore<row_major>(&c, o + 32u, (*acc)[2], p.n); }
  if (FN > 3u) { subgroupMatrixStore<row_major>(&c, o + 48u, (*acc)[3], p.n); }
}

// Passes one accumulator, the block at (row, col) of the tile, through the scratch of
// subgroup `sg`; its lanes then write the elements inside C. Which invocations form a
// subgroup is the implementation's choice, so the block is addressed by subgroup_id
// and walked by subgroup_invocation_id (`lane`, of `lanes`). The barriers are
// workgroup-wide (WGSL has no subgroup barrier), reached alike by every subgroup.
fn emit(at: Place, row: u32, col: u32, acc: Result, sg: u32, lane: u32, lanes: u32) {
  subgroupMatrixStore<row_major>(&scratch, sg * FRAG, acc, 16u);
  workgroupBarrier();
  for (var e = lane; e < FRAG; e += lanes) {
    let i = at.m0 + row + e / 16u;
    let j = at.n0 + col + e % 16u;
    if (i < p.m && j < p.n) {
      var v = scratch[sg * FRAG + e];
      if (SCALE_A) { v *= scale[1]; }
      if (BIAS) { v += bias[j]; }
      let o = at.base_c + i * p.n + j;
      if (ACCUM) { c[o] += v; } else { c[o] = v; }
    }
  }
  workgroupBarrier();
}

fn emit_band(at: Place, row: u32, wn: u32, acc: ptr<function, Band>, sg: u32, lane: u32, lanes: u32) {
  emit(at, row, wn, (*acc)[0], sg, lane, lanes);
  if (FN > 1u) { emit(at, row, wn + 16u, (*acc)[1], sg, lane, lanes); }
  if (FN > 2u) { emit(at, row, wn + 32u, (*acc)[2], sg, lane, lanes); }
  if (FN > 3u) { emit(at, row, wn + 48u, (*acc)[3], sg, lane, lanes); }
}

// The K loop. Slice t is multiplied from stage t % 2 while slice t + 1 travels
// through registers into the other stage; the barrier at the end of each slice both
// publishes the next stage and frees the current one for overwriting.
fn product(
  at: Place, li: u32, wm: u32, wn: u32,
  acc0: ptr<function, Band>, acc1: ptr<function, Band>, acc2: ptr<function, Band>, acc3: ptr<function, Band>,
) {
  var staged: Staged;
  let steps = at.steps;
  if (steps > 0u) {
    load_slice(at, at.k0, li, &staged);
    store_slice(0u, li, &staged);
  }
  workgroupBarrier();
  for (var t = 0u; t < steps; t++) {
    let s = t % 2u;
    // WHOLE: the next slice is fetched and staged unconditionally (the last step
    // fetches its own again, into the stage no one reads), so no branch's two outcomes
    // need merging.
    let more = WHOLE || t + 1u < steps;
    if (more) { load_slice(at, at.k0 + select(t + 1u, min(t + 1u, steps - 1u), WHOLE) * BK, li, &staged); }
    for (var kk = 0u; kk < BK; kk += 16u) {
      mma_step(s, kk, wm, wn, acc0, acc1, acc2, acc3);
    }
    if (more) { store_slice(1u - s, li, &staged); }
    workgroupBarrier();
  }
}

fn emit_all(
  at: Place, wm: u32, wn: u32, sg: u32, lane: u32, lanes: u32,
  acc0: ptr<function, Band>, acc1: ptr<function, Band>, acc2: ptr<function, Band>, acc3: ptr<function, Band>,
) {
  emit_band(at, wm, wn, acc0, sg, lane, lanes);
  if (FM > 1u) { emit_band(at, wm + 16u, wn, acc1, sg, lane, lanes); }
  if (FM > 2u) { emit_band(at, wm + 32u, wn, acc2, sg, lane, lanes); }
  if (FM > 3u) { emit_band(at, wm + 48u, wn, acc3, sg, lane, lanes); }
}

@compute @workgroup_size(THREADS)
fn main(
  @builtin(workgroup_id) wid: vec3u,
  @builtin(num_workgroups) nwg: vec3u,
  @builtin(local_invocation_index) li: u32,
  @builtin(subgroup_id) sg: u32,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) lanes: u32,
) {
  var at: Place;
  if (!place(wid, nwg, &at)) { return; }
  let wm = (sg / SG_N) * WM;
  let wn = (sg % SG_N) * WN;
  let direct = !BIAS && at.m0 + BM <= p.m && at.n0 + BN <= p.n;
  var acc0: Band;
  var acc1: Band;
  var acc2: Band;
  var acc3: Band;
  if (ACCUM && direct) {
    start_band(at, wm, wn, &acc0);
    if (FM > 1u) { start_band(at, wm + 16u, wn, &acc1); }
    if (FM > 2u) { start_band(at, wm + 32u, wn, &acc2); }
    if (FM > 3u) { start_band(at, wm + 48u, wn, &acc3); }
  }
  product(at, li, wm, wn, &acc0, &acc1, &acc2, &acc3);
  if (direct) {
    store_band(at, wm, wn, &acc0);
    if (FM > 1u) { store_band(at, wm + 16u, wn, &acc1); }
    if (FM > 2u) { store_band(at, wm + 32u, wn, &acc2); }
    if (FM > 3u) { store_band(at, wm + 48u, wn, &acc3); }
    return;
  }
  emit_all(at, wm, wn, sg, lane, lanes, &acc0, &acc1, &acc2, &acc3);
}

@compute @workgroup_size(THREADS)
fn main_staged(
  @builtin(workgroup_id) wid: vec3u,
  @builtin(num_workgroups) nwg: vec3u,
  @builtin(local_invocation_index) li: u32,
  @builtin(subgroup_id) sg: u32,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) lanes: u32,
) {
  var at: Place;
  if (!place(wid, nwg, &at)) { return; }
  let wm = (sg / SG_N) * WM;
  let wn = (sg % SG_N) * WN;
  var acc0: Band;
  var acc1: Band;
  var acc2: Band;
  var acc3: Band;
  product(at, li, wm, wn, &acc0, &acc1, &acc2, &acc3);
  emit_all(at, wm, wn, sg, lane, lanes, &acc0, &acc1, &acc2, &acc3);
}
