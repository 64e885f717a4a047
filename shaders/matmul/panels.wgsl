// The f32 matmul on uniform panels, the software GPU's path (layouts and sizes:
// common/matmul_params.wgsl).
//
// llvmpipe (Mesa's CPU rasteriser, what compatibility mode runs on) executes 8
// invocations as SIMD lanes. A load from a storage or workgroup array assembles its
// vector one lane at a time through the stack, a store-forwarding stall per float
// (measured on Mesa 22.3: 118 ns per 8-lane vec4 load), while a load from a uniform
// buffer is a register gather (10 ns). The tiled kernel (tiled.wgsl) is bound by such loads
// whatever its tile (1.3 GFLOP/s for every tile on 1600x256x768). Here `pack` first
// copies each operand, once, into 64 KiB panels of pr rows (of C's rows for A, of
// C's columns for B) by kc consecutive k, zero-padded, and `panels` multiplies an A
// panel by a B panel, both bound as uniform-buffer windows, each invocation
// accumulating an 8x16 block of C in registers (8-10 GFLOP/s on the same shape; 8x8
// blocks were no faster, 16x16 slower). The launcher dispatches `panels` per (A panel,
// B panel, two K chunks); chunks after those add to the partial sums in C, and the
// last applies bias and activation.

// #include "common/matmul_loads.wgsl"
// #include "common/matmul_epilogue.wgsl"

override TRANS_A: bool = false;  // pack: the operand is stored [k][rows]

const PANEL_V4 = 4096u;                  // 64 KiB, the uniform binding limit
const PANEL_WG = 32u;

// Panel geometry is in the parameters, not override constants, so that every K
// compiles to the same pipeline: `pr` rows of `kc` = 4 * `kq` consecutive k, with
// pr * kc = 16384 floats (64 KiB).
struct PackParams {
  rows: u32,        // rows of the operand as packed (M for A, N for B)
  k: u32,
  base: u32,        // element offset of this batch's operand
  k_chunks: u32,
  total: u32,       // vec4s written: rows * k_chunks * kq
  pr: u32,
  kq: u32,
}

@group(0) @binding(0) var<uniform> pk: PackParams;
@group(0) @binding(2) var<storage, read_write> packed: array<vec4f>;

// Vec4 kq of k chunk `chunk` of operand row `row`, written where it sits in the packed
// layout: panel-major blocks of [pr rows][kc k], so the block of (panel, k chunk) is
// one 64 KiB window. K past the end is zero-filled; rows past the end are not written
// (they only reach outputs that are never stored). TRANS_A: the source is stored
// [k][rows].
@compute @workgroup_size(64)
fn pack(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wid.y * nwg.x + wid.x) * 64u + li;
  if (i >= pk.total) { return; }
  let kq = i % pk.kq;
  let chunk = (i / pk.kq) % pk.k_chunks;
  let row = i / (pk.kq * pk.k_chunks);
  let col = (chunk * pk.kq + kq) * 4u;
  let at = (((row / pk.pr) * pk.k_chunks + chunk) * pk.pr + row % pk.pr) * pk.kq + kq;
  if (!TRANS_A) {
    packed[at] = fetch_a(pk.base, row, col, pk.rows, pk.k);
    return;
  }
  var v = vec4f(0.0);
  for (var j = 0u; j < 4u; j++) {
    if (col + j < pk.k) { v[j] = element_a(pk.base + (col + j) * pk.rows + row); }
  }
  packed[at] = v;
}

struct PanelParams {
  m: u32,
  n: u32,
  m0: u32,          // origin in C of this dispatch's panels
  n0: u32,
  base_c: u32,      // element offset of this batch's C
  flags: u32,       // P_* below
  pr: u32,
  kq: u32,
}

@group(0) @binding(0) var<uniform> pp: PanelParams;
@group(0) @binding(1) var<uniform> panel_a: array<vec4f, PANEL_V4>;
@group(0) @binding(2) var<uniform> panel_b: array<vec4f, PANEL_V4>;
// The next K chunk's pair (P_SECOND), so one dispatch covers two.
@group(0) @binding(5) var<uniform> panel_a2: array<vec4f, PANEL_V4>;
@group(0) @binding(6) var<uniform> panel_b2: array<vec4f, PANEL_V4>;

// Four consecutive columns of B at the 4 k of one step, transposed so a row's update
// is four vec4 multiply-adds.
struct Cols { x: vec4f, y: vec4f, z: vec4f, w: vec4f }

fn cols(b0: vec4f, b1: vec4f, b2: vec4f, b3: vec4f) -> Cols {
  return Cols(vec4f(b0.x, b1.x, b2.x, b3.x), vec4f(b0.y, b1.y, b2.y, b3.y), vec4f(b0.z, b1.z, b2.z, b3.z), vec4f(b0.w, b1.w, b2.w, b3.w));
}

fn rank4(a: vec4f, t: Cols) -> vec4f {
  return a.x * t.x + a.y * t.y + a.z * t.z + a.w * t.w;
}

// The epilogue is chosen by flags rather than override constants: it runs once per
// output, and each override combination would cost a pipeline compile of seconds.
const P_FIRST = 1u;       // the dispatch with the first K chunk
const P_LAST = 2u;        // the dispatch with the last K chunk
const P_BIAS = 4u;
const P_ACCUM = 8u;       // C += result
const P_ACT_SHIFT = 4u;   // activation (MATMUL_ACTS) in bits 4-5
const P_SECOND = 64u;     // a second K chunk in panel_a2, panel_b2

fn has(flag: u32) -> bool { return (pp.flags & flag) != 0u; }

fn panel_act() -> u32 { return (pp.flags >> P_ACT_SHIFT) & 3u; }

// C's value from this dispatch's sums `acc`, `prior` (the partial sums of earlier
// dispatches, or C itself when accumulating; read only when needed) and the bias `bv`.
fn panel_value(acc: vec4f, prior: vec4f, bv: vec4f) -> vec4f {
  if (panel_act() == 0u) {
    // Linear: the bias and any accumulated C enter once, with the first dispatch.
    var v = acc + prior;
    if (has(P_BIAS) && has(P_FIRST)) { v += bv; }
    return v;
  }
  // The launcher never splits K over dispatches for an accumulating activation, so
  // `prior` is either the partial sum (later dispatches) or, with one dispatch and
  // P_ACCUM, C to add to.
  var v = acc;
  if (!has(P_FIRST)) { v += prior; }
  if (!has(P_LAST)) { return v; }
  if (has(P_BIAS)) { v += bv; }
  v = activate_by(v, panel_act());
  if (has(P_ACCUM)) { v += prior; }
  return v;
}

fn needs_prior() -> bool { return !has(P_FIRST) || has(P_ACCUM); }

fn needs_bias() -> bool { return has(P_BIAS) && select(has(P_LAST), has(P_FIRST), panel_act() == 0u); }

// Element by element, for C rows that are not whole vec4s.
fn panel_emit(row: u32, col: u32, acc: vec4f) {
  if (row >= pp.m || col >= pp.n) { return; }
  let at = pp.base_c + row * pp.n + col;
  var prior = vec4f(0.0);
  var bv = vec4f(0.0);
  for (var j = 0u; j < 4u; j++) {
    if (col + j < pp.n) {
      if (needs_prior()) { prior[j] = c[at + j]; }
      if (needs_bias()) { bv[j] = bias[(col + j) / 4u][(col + j) % 4u]; }
    }
  }
  let v = panel_value(acc, prior, bv);
  for (var j = 0u; j < 4u; j++) {
    if (col + j < pp.n) { c[at + j] = v[j]; }
  }
}

fn panel_emit_vec4(row: u32, col: u32, acc: vec4f) {
  if (row >= pp.m || col >= pp.n) { return; }
  let at = (pp.base_c + row * pp.n + col) / 4u;
  var prior = vec4f(0.0);
  var bv = vec4f(0.0);
  if (needs_prior()) { prior = c4[at]; }
  if (needs_bias()) { bv = bias[col / 4u]; }
  c4[at] = panel_value(acc, prior, bv);
}

fn update_row(acc: ptr<function, array<vec4f, 32>>, at: u32, a: vec4f, t0: Cols, t1: Cols, t2: Cols, t3: Cols) {
  (*acc)[at] += rank4(a, t0);
  (*acc)[at + 1u] += rank4(a, t1);
  (*acc)[at + 2u] += rank4(a, t2);
  (*acc)[at + 3u] += rank4(a, t3);
}

// One K chunk: the rows of A at `ra` and of B at `rb` of a pair of panels. Written out
// (no loops over the block) so every index is a constant and the block stays in
// registers. Two copies, one per pair of panels: a pointer to a uniform as a function
// parameter needs WGSL's unrestricted_pointer_parameters, which wgpu's naga (Deno) lacks.
fn panel_chunk_first(acc: ptr<function, array<vec4f, 32>>, ra: u32, rb: u32) {
  let q = pp.kq;
  for (var kq = 0u; kq < q; kq++) {
    let t0 = cols(panel_b[rb + kq], panel_b[rb + q + kq], panel_b[rb + 2u * q + kq], panel_b[rb + 3u * q + kq]);
    let t1 = cols(panel_b[rb + 4u * q + kq], panel_b[rb + 5u * q + kq], panel_b[rb + 6u * q + kq], panel_b[rb + 7u * q + kq]);
    let t2 = cols(panel_b[rb + 8u * q + kq], panel_b[rb + 9u * q + kq], panel_b[rb + 10u * q + kq], panel_b[rb + 11u * q + kq]);
    let t3 = cols(panel_b[rb + 12u * q + kq], panel_b[rb + 13u * q + kq], panel_b[rb + 14u * q + kq], panel_b[rb + 15u * q + kq]);
    update_row(acc, 0u, panel_a[ra + kq], t0, t1, t2, t3);
    update_row(acc, 4u, panel_a[ra + q + kq], t0, t1, t2, t3);
    update_row(acc, 8u, panel_a[ra + 2u * q + kq], t0, t1, t2, t3);
    update_row(acc, 12u, panel_a[ra + 3u * q + kq], t0, t1, t2, t3);
    update_row(acc, 16u, panel_a[ra + 4u * q + kq], t0, t1, t2, t3);
    update_row(acc, 20u, panel_a[ra + 5u * q + kq], t0, t1, t2, t3);
    update_row(acc, 24u, panel_a[ra + 6u * q + kq], t0, t1, t2, t3);
    update_row(acc, 28u, panel_a[ra + 7u * q + kq], t0, t1, t2, t3);
  }
}

fn panel_chunk_second(acc: ptr<function, array<vec4f, 32>>, ra: u32, rb: u32) {
  let q = pp.kq;
  for (var kq = 0u; kq < q; kq++) {
    let t0 = cols(panel_b2[rb + kq], panel_b2[rb + q + kq], panel_b2[rb + 2u * q + kq], panel_b2[rb + 3u * q + kq]);
    let t1 = cols(panel_b2[rb + 4u * q + kq], panel_b2[rb + 5u * q + kq], panel_b2[rb + 6u * q + kq], panel_b2[rb + 7u * q + kq]);
    let t2 = cols(panel_b2[rb + 8u * q + kq], panel_b2[rb + 9u * q + kq], panel_b2[rb + 10u * q + kq], panel_b2[rb + 11u * q + kq]);
    let t3 = cols(panel_b2[rb + 12u * q + kq], panel_b2[rb + 13u * q + kq], panel_b2[rb + 14u * q + kq], panel_b2[rb + 15u * q + kq]);
    update_row(acc, 0u, panel_a2[ra + kq], t0, t1, t2, t3);
    update_row(acc, 4u, panel_a2[ra + q + kq], t0, t1, t2, t3);
    update_row(acc, 8u, panel_a2[ra + 2u * q + kq], t0, t1, t2, t3);
    update_row(acc, 12u, panel_a2[ra + 3u * q + kq], t0, t1, t2, t3);
    update_row(acc, 16u, panel_a2[ra + 4u * q + kq], t0, t1, t2, t3);
    update_row(acc, 20u, panel_a2[ra + 5u * q + kq], t0, t1, t2, t3);
    update_row(acc, 24u, panel_a2[ra + 6u * q + kq], t0, t1, t2, t3);
    update_row(acc, 28u, panel_a2[ra + 7u * q + kq], t0, t1, t2, t3);
  }
}

// This invocation's block of the panel product, 8 rows by 16 columns: its first row
// and column in C, or false when the invocation has no block. acc[4 * r + g] is row r,
// columns 4g..4g+3.
fn panel_product(wid: vec3u, li: u32, origin: ptr<function, vec2u>, acc: ptr<function, array<vec4f, 32>>) -> bool {
  let lanes_n = (min(pp.pr, pp.n - pp.n0) + 15u) / 16u;
  let lanes_m = (min(pp.pr, pp.m - pp.m0) + 7u) / 8u;
  let id = wid.x * PANEL_WG + li;
  if (id >= lanes_m * lanes_n) { return false; }
  let bm = id / lanes_n;
  let bn = id % lanes_n;
  let ra = bm * 8u * pp.kq;
  let rb = bn * 16u * pp.kq;
  panel_chunk_first(acc, ra, rb);
  if (has(P_SECOND)) { panel_chunk_second(acc, ra, rb); }
  *origin = vec2u(pp.m0 + bm * 8u, pp.n0 + bn * 16u);
  return true;
}

@compute @workgroup_size(PANEL_WG)
fn panels(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  var o: vec2u;
  var acc: array<vec4f, 32>;
  if (!panel_product(wid, li, &o, &acc)) { return; }
  // Constant indices, so the accumulators never leave registers.
  panel_emit(o.x, o.y, acc[0]); panel_emit(o.x, o.y + 4u, acc[1]); panel_emit(o.x, o.y + 8u, acc[2]); panel_emit(o.x, o.y + 12u, acc[3]);
  panel_emit(o.x + 1u, o.y, acc[4]); panel_emit(o.x + 1u, o.y + 4u, acc[5]); panel_emit(o.x + 1u, o.y + 8u, acc[6]); panel_emit(o.x + 1u, o.y + 12u, acc[7]);
  panel_emit(o.x + 2u, o.y, acc[8]); panel_emit(o.x + 2u, o.y + 4u, acc[9]); panel_emit(o.x + 2u, o.y + 8u, acc[10]); panel_emit(o.x + 2u, o.y + 12u, acc[11]);
  panel_emit(o.x + 3u, o.y, acc[12]); panel_emit(o.x + 3u, o.y + 4u, acc[13]); panel_emit(o.x + 3u, o.y + 8u, acc[14]); panel_emit(o.x + 3u, o.y + 12u, acc[15]);
  panel_emit(o.x + 4u, o.y, acc[16]); panel_emit(o.x + 4u, o.y + 4u, acc[17]); panel_emit(o.x + 4u, o.y + 8u, acc[18]); panel_emit(o.x + 4u, o.y + 12u, acc[19]);
  panel_emit(o.x + 5u, o.y, acc[20]); panel_emit(o.x + 5u, o.y + 4u, acc[21]); panel_emit(o.x + 5u, o.y + 8u, acc[22]); panel_emit(o.x + 5u, o.y + 12u, acc[23]);
  panel_emit(o.x + 6u, o.y, acc[24]); panel_emit(o.x + 6u, o.y + 4u, acc[25]); panel_emit(o.x + 6u, o.y + 8u, acc[26]); panel_emit(o.x + 6u, o.y + 12u, acc[27]);
  panel_emit(o.x + 7u, o.y, acc[28]); panel_emit(o.x + 7u, o.y + 4u, acc[29]); panel_emit(o.x + 7u, o.y + 8u, acc[30]); panel_emit(o.x + 7u, o.y + 12u, acc[31]);
}

@compute @workgroup_size(PANEL_WG)
fn panels_vec4(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  var o: vec2u;
  var acc: array<vec4f, 32>;
  if (!panel_product(wid, li, &o, &acc)) { return; }
  // Constant indices, so the accumulators never leave registers.
  panel_emit_vec4(o.x, o.y, acc[0]); panel_emit_vec4(o.x, o.y + 4u, acc[1]); panel_emit_vec4(o.x, o.y + 8u, acc[2]); panel_emit_vec4(o.x, o.y + 12u, acc[3]);
  panel_emit_vec4(o.x + 1u, o.y, acc[4]); panel_emit_vec4(o.x + 1u, o.y + 4u, acc[5]); panel_emit_vec4(o.x + 1u, o.y + 8u, acc[6]); panel_emit_vec4(o.x + 1u, o.y + 12u, acc[7]);
  panel_emit_vec4(o.x + 2u, o.y, acc[8]); panel_emit_vec4(o.x + 2u, o.y + 4u, acc[9]); panel_emit_vec4(o.x + 2u, o.y + 8u, acc[10]); panel_emit_vec4(o.x + 2u, o.y + 12u, acc[11]);
  panel_emit_vec4(o.x + 3u, o.y, acc[12]); panel_emit_vec4(o.x + 3u, o.y + 4u, acc[13]); panel_emit_vec4(o.x + 3u, o.y + 8u, acc[14]); panel_emit_vec4(o.x + 3u, o.y + 12u, acc[15]);
  panel_emit_vec4(o.x + 4u, o.y, acc[16]); panel_emit_vec4(o.x + 4u, o.y + 4u, acc[17]); panel_emit_vec4(o.x + 4u, o.y + 8u, acc[18]); panel_emit_vec4(o.x + 4u, o.y + 12u, acc[19]);
  panel_emit_vec4(o.x + 5u, o.y, acc[20]); panel_emit_vec4(o.x + 5u, o.y + 4u, acc[21]); panel_emit_vec4(o.x + 5u, o.y + 8u, acc[22]); panel_emit_vec4(o.x + 5u, o.y + 12u, acc[23]);
  panel_emit_vec4(o.x + 6u, o.y, acc[24]); panel_emit_vec4(o.x + 6u, o.y + 4u, acc[25]); panel_emit_vec4(o.x + 6u, o.y + 8u, acc[26]); panel_emit_vec4(o.x + 6u, o.y + 12u, acc[27]);
  panel_emit_vec4(o.x + 7u, o.y, acc[28]); panel_emit_vec4(o.x + 7u, o.y + 4u, acc[29]); panel_emit_vec4(o.x + 7u, o.y + 8u, acc[30]); panel_emit_vec4(o.x + 7u, o.y + 12u, acc[31]);
}
