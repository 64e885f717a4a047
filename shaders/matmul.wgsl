// Batched matrix multiply, f32:
//   C[b] = act(op(A[b]) @ op(B[b]) + bias)            (C[b] += ... with ACCUM)
// op(A) is A stored [M, K] or, with TRANS_A, A stored [K, M] and read transposed;
// op(B) is B stored [K, N] or, with TRANS_B, B stored [N, K]. All row-major and
// contiguous; batch b starts offset_a + stride_a * b elements into A (likewise B,
// C), so a stride of 0 broadcasts an operand. bias is [N], added to every row. Sizes and
// strides come in the uniform; the variants below are override constants.
//
// Entry points: `main_vec4` stores C as vec4s (N, offset_c and stride_c multiples
// of 4),
// `main` element by element. Storage is bound as vec4 arrays either way: VEC_A and
// VEC_B say whether that operand's rows, offset and batch stride are multiples of 4, so a
// 4-element run along a row is one aligned vec4 load; otherwise the 4 elements are
// read one by one.
//
// Tiling: a workgroup of WG_X * WG_Y threads owns a BM x BN = 8*WG_Y x 8*WG_X tile
// of C, each thread an 8x8 register block made of two groups of 4 rows (4*ty and
// BM/2 + 4*ty) by two groups of 4 columns (4*tx and BN/2 + 4*tx), so every
// workgroup-memory read in the inner loop is a vec4 and the 32 threads of a warp,
// laid out 8 (n) x 4 (m), read 8 neighbouring B vec4s and 4 neighbouring A vec4s
// (no bank conflicts). The A tile is stored transposed, [k][m], so a thread's 4 rows
// at one k are one vec4. K advances BK at a time through two workgroup-memory
// stages: the next K slice is loaded into registers before the current stage is
// multiplied and written to the other stage after, so global latency overlaps the
// arithmetic and each slice costs one barrier. The slice loop is unrolled by two so
// the stage index is a constant and tile reads need no per-read index arithmetic.
// Workgroups walk output tiles in groups of GROUP_M tile rows, so those running at
// once share A and B panels in L2.

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override VEC_A: bool = false;
override VEC_B: bool = false;
override BIAS: bool = false;
override ACT: u32 = 0u;          // 0 none, 1 silu, 2 gelu (tanh form), 3 relu
override ACCUM: bool = false;
override WG_X: u32 = 16u;        // threads along N (a multiple of 8)
override WG_Y: u32 = 16u;        // threads along M (a multiple of 4)
override BK: u32 = 16u;          // K slice per stage (a multiple of 4)

override THREADS = WG_X * WG_Y;
override BM = 8u * WG_Y;
override BN = 8u * WG_X;
override KQ = BK / 4u;                       // vec4s across one K slice
override LOADS_A = BM * KQ / THREADS;        // vec4 loads per thread per slice (1-4)
override LOADS_B = BN * KQ / THREADS;

const ROW_V4 = 32u;       // vec4 slots in a tile row: BM/4 and BN/4 are at most 32
const GROUP_M = 8u;

struct Params {
  m: u32,
  n: u32,
  k: u32,
  batch_base: u32,       // batch index of workgroup z = 0
  stride_a: u32,
  stride_b: u32,
  stride_c: u32,
  tiles_m: u32,
  tiles_n: u32,
  offset_a: u32,
  offset_b: u32,
  offset_c: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4f>;
@group(0) @binding(2) var<storage, read> b: array<vec4f>;
@group(0) @binding(3) var<storage, read> bias: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

// Rows 0..BK-1 are stage 0, BK..2BK-1 stage 1.
var<workgroup> tile_a: array<array<vec4f, ROW_V4>, 2u * BK>;   // [k][m / 4]
var<workgroup> tile_b: array<array<vec4f, ROW_V4>, 2u * BK>;   // [k][n / 4]

struct Place {
  base_a: u32,      // element offsets of this batch
  base_b: u32,
  base_c: u32,
  m0: u32,          // tile origin in C
  n0: u32,
  li: u32,          // local invocation index
  tx: u32,          // column group
  ty: u32,          // row group
}

// One K slice in flight: up to 4 vec4s of each operand per thread.
struct Staged {
  a0: vec4f, a1: vec4f, a2: vec4f, a3: vec4f,
  b0: vec4f, b1: vec4f, b2: vec4f, b3: vec4f,
}

fn element_a(i: u32) -> f32 { return a[i / 4u][i % 4u]; }
fn element_b(i: u32) -> f32 { return b[i / 4u][i % 4u]; }

// Elements (row, col..col+3) of the row-major [rows, cols] matrix at `base` in A,
// zero outside it.
fn fetch_a(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (row >= rows) { return v; }
  let i = base + row * cols + col;
  if (VEC_A) {
    if (col < cols) { v = a[i / 4u]; }
    return v;
  }
  for (var j = 0u; j < 4u; j++) {
    if (col + j < cols) { v[j] = element_a(i + j); }
  }
  return v;
}

fn fetch_b(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (row >= rows) { return v; }
  let i = base + row * cols + col;
  if (VEC_B) {
    if (col < cols) { v = b[i / 4u]; }
    return v;
  }
  for (var j = 0u; j < 4u; j++) {
    if (col + j < cols) { v[j] = element_b(i + j); }
  }
  return v;
}

// Load u of the A slice starting at k0: 4 elements along a stored row, consecutive
// loads (threads) taking consecutive vec4s of a row.
fn load_a(at: Place, k0: u32, u: u32) -> vec4f {
  if (TRANS_A) { return fetch_a(at.base_a, k0 + u / (BM / 4u), at.m0 + (u % (BM / 4u)) * 4u, p.k, p.m); }
  return fetch_a(at.base_a, at.m0 + u / KQ, k0 + (u % KQ) * 4u, p.m, p.k);
}

fn load_b(at: Place, k0: u32, u: u32) -> vec4f {
  if (TRANS_B) { return fetch_b(at.base_b, at.n0 + u / KQ, k0 + (u % KQ) * 4u, p.n, p.k); }
  return fetch_b(at.base_b, k0 + u / (BN / 4u), at.n0 + (u % (BN / 4u)) * 4u, p.k, p.n);
}

// Load u into stage s, transposing A when it is stored with K contiguous.
fn put_a(s: u32, u: u32, v: vec4f) {
  if (TRANS_A) {
    tile_a[s * BK + u / (BM / 4u)][u % (BM / 4u)] = v;
    return;
  }
  let m = u / KQ;
  let k = s * BK + (u % KQ) * 4u;
  tile_a[k][m / 4u][m % 4u] = v.x;
  tile_a[k + 1u][m / 4u][m % 4u] = v.y;
  tile_a[k + 2u][m / 4u][m % 4u] = v.z;
  tile_a[k + 3u][m / 4u][m % 4u] = v.w;
}

fn put_b(s: u32, u: u32, v: vec4f) {
  if (!TRANS_B) {
    tile_b[s * BK + u / (BN / 4u)][u % (BN / 4u)] = v;
    return;
  }
  let n = u / KQ;
  let k = s * BK + (u % KQ) * 4u;
  tile_b[k][n / 4u][n % 4u] = v.x;
  tile_b[k + 1u][n / 4u][n % 4u] = v.y;
  tile_b[k + 2u][n / 4u][n % 4u] = v.z;
  tile_b[k + 3u][n / 4u][n % 4u] = v.w;
}

// Unrolled by hand (the LOADS conditions are constants) so the staged vec4s stay in
// registers.
fn load_slice(at: Place, k0: u32, r: ptr<function, Staged>) {
  (*r).a0 = load_a(at, k0, at.li);
  if (LOADS_A > 1u) { (*r).a1 = load_a(at, k0, at.li + THREADS); }
  if (LOADS_A > 2u) { (*r).a2 = load_a(at, k0, at.li + 2u * THREADS); }
  if (LOADS_A > 3u) { (*r).a3 = load_a(at, k0, at.li + 3u * THREADS); }
  (*r).b0 = load_b(at, k0, at.li);
  if (LOADS_B > 1u) { (*r).b1 = load_b(at, k0, at.li + THREADS); }
  if (LOADS_B > 2u) { (*r).b2 = load_b(at, k0, at.li + 2u * THREADS); }
  if (LOADS_B > 3u) { (*r).b3 = load_b(at, k0, at.li + 3u * THREADS); }
}

fn store_slice(at: Place, s: u32, r: ptr<function, Staged>) {
  put_a(s, at.li, (*r).a0);
  if (LOADS_A > 1u) { put_a(s, at.li + THREADS, (*r).a1); }
  if (LOADS_A > 2u) { put_a(s, at.li + 2u * THREADS, (*r).a2); }
  if (LOADS_A > 3u) { put_a(s, at.li + 3u * THREADS, (*r).a3); }
  put_b(s, at.li, (*r).b0);
  if (LOADS_B > 1u) { put_b(s, at.li + THREADS, (*r).b1); }
  if (LOADS_B > 2u) { put_b(s, at.li + 2u * THREADS, (*r).b2); }
  if (LOADS_B > 3u) { put_b(s, at.li + 3u * THREADS, (*r).b3); }
}

// acc[2 * i + h]: row group i (rows 0-3 from a0, 4-7 from a1), column group h.
fn multiply(at: Place, s: u32, acc: ptr<function, array<vec4f, 16>>) {
  for (var kk = 0u; kk < BK; kk++) {
    let row = s * BK + kk;
    let a0 = tile_a[row][at.ty];
    let a1 = tile_a[row][at.ty + WG_Y];
    let b0 = tile_b[row][at.tx];
    let b1 = tile_b[row][at.tx + WG_X];
    (*acc)[0] += a0.x * b0;
    (*acc)[1] += a0.x * b1;
    (*acc)[2] += a0.y * b0;
    (*acc)[3] += a0.y * b1;
    (*acc)[4] += a0.z * b0;
    (*acc)[5] += a0.z * b1;
    (*acc)[6] += a0.w * b0;
    (*acc)[7] += a0.w * b1;
    (*acc)[8] += a1.x * b0;
    (*acc)[9] += a1.x * b1;
    (*acc)[10] += a1.y * b0;
    (*acc)[11] += a1.y * b1;
    (*acc)[12] += a1.z * b0;
    (*acc)[13] += a1.z * b1;
    (*acc)[14] += a1.w * b0;
    (*acc)[15] += a1.w * b1;
  }
}

// Multiplies slice t (in stage s) while slice t + 1 travels from global memory into
// the other stage.
fn advance(at: Place, s: u32, t: u32, steps: u32, staged: ptr<function, Staged>, acc: ptr<function, array<vec4f, 16>>) {
  let more = t + 1u < steps;
  if (more) { load_slice(at, (t + 1u) * BK, staged); }
  multiply(at, s, acc);
  if (more) { store_slice(at, 1u - s, staged); }
  workgroupBarrier();
}

// The product tile of this workgroup, or false when the folded grid's workgroup
// has no tile.
fn product(wid: vec3u, nwg: vec3u, li: u32, at: ptr<function, Place>, acc: ptr<function, array<vec4f, 16>>) -> bool {
  let tile = wid.y * nwg.x + wid.x;
  let tiles_n = p.tiles_n;
  if (tile >= p.tiles_m * tiles_n) { return false; }
  let per_group = GROUP_M * tiles_n;
  let first_m = (tile / per_group) * GROUP_M;
  let group_m = min(p.tiles_m - first_m, GROUP_M);
  let in_group = tile % per_group;
  let batch = p.batch_base + wid.z;
  let warp = li / 32u;
  let lane = li % 32u;
  (*at).base_a = p.offset_a + batch * p.stride_a;
  (*at).base_b = p.offset_b + batch * p.stride_b;
  (*at).base_c = p.offset_c + batch * p.stride_c;
  (*at).m0 = (first_m + in_group % group_m) * BM;
  (*at).n0 = (in_group / group_m) * BN;
  (*at).li = li;
  (*at).tx = (warp % (WG_X / 8u)) * 8u + lane % 8u;
  (*at).ty = (warp / (WG_X / 8u)) * 4u + lane / 8u;

  let place = *at;
  var staged: Staged;
  let steps = (p.k + BK - 1u) / BK;
  if (steps > 0u) {
    load_slice(place, 0u, &staged);
    store_slice(place, 0u, &staged);
  }
  workgroupBarrier();
  for (var t = 0u; t < steps; t += 2u) {
    advance(place, 0u, t, steps, &staged, acc);
    if (t + 1u < steps) { advance(place, 1u, t + 1u, steps, &staged, acc); }
  }
  return true;
}

fn activate(x: vec4f) -> vec4f {
  switch ACT {
    case 1u: { return x / (1.0 + exp(-x)); }
    case 2u: {
      // tanh saturates long before |u| = 10; the clamp keeps an exp-based tanh finite.
      let u = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), vec4f(-10.0), vec4f(10.0));
      return 0.5 * x * (1.0 + tanh(u));
    }
    case 3u: { return max(x, vec4f(0.0)); }
    default: { return x; }
  }
}

// Row of C for register row i (0-3: the first row group, 4-7: the second) and the
// first column of column group h.
fn block_row(at: Place, i: u32) -> u32 {
  return at.m0 + (i / 4u) * (BM / 2u) + at.ty * 4u + i % 4u;
}

fn block_col(at: Place, h: u32) -> u32 {
  return at.n0 + h * (BN / 2u) + at.tx * 4u;
}

// Writes one register vec4 (row i, column group h) element by element.
fn emit(at: Place, i: u32, h: u32, acc: vec4f) {
  let row = block_row(at, i);
  let col = block_col(at, h);
  if (row >= p.m || col >= p.n) { return; }
  var v = acc;
  if (BIAS) {
    for (var j = 0u; j < 4u; j++) {
      if (col + j < p.n) { v[j] += bias[(col + j) / 4u][(col + j) % 4u]; }
    }
  }
  v = activate(v);
  let at_c = at.base_c + row * p.n + col;
  for (var j = 0u; j < 4u; j++) {
    if (col + j < p.n) {
      if (ACCUM) { c[at_c + j] += v[j]; } else { c[at_c + j] = v[j]; }
    }
  }
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  var at: Place;
  var acc: array<vec4f, 16>;
  if (!product(wid, nwg, li, &at, &acc)) { return; }
  // Constant indices throughout, so the accumulators never leave registers.
  emit(at, 0u, 0u, acc[0]);  emit(at, 0u, 1u, acc[1]);
  emit(at, 1u, 0u, acc[2]);  emit(at, 1u, 1u, acc[3]);
  emit(at, 2u, 0u, acc[4]);  emit(at, 2u, 1u, acc[5]);
  emit(at, 3u, 0u, acc[6]);  emit(at, 3u, 1u, acc[7]);
  emit(at, 4u, 0u, acc[8]);  emit(at, 4u, 1u, acc[9]);
  emit(at, 5u, 0u, acc[10]); emit(at, 5u, 1u, acc[11]);
  emit(at, 6u, 0u, acc[12]); emit(at, 6u, 1u, acc[13]);
  emit(at, 7u, 0u, acc[14]); emit(at, 7u, 1u, acc[15]);
}

@group(0) @binding(4) var<storage, read_write> c4: array<vec4f>;

// One aligned vec4 store (N and stride_c are multiples of 4, so a column group is
// either wholly inside C or wholly outside).
fn emit_vec4(at: Place, i: u32, h: u32, acc: vec4f) {
  let row = block_row(at, i);
  let col = block_col(at, h);
  if (row >= p.m || col >= p.n) { return; }
  var v = acc;
  if (BIAS) { v += bias[col / 4u]; }
  v = activate(v);
  let at_c = (at.base_c + row * p.n + col) / 4u;
  if (ACCUM) { c4[at_c] += v; } else { c4[at_c] = v; }
}

@compute @workgroup_size(THREADS)
fn main_vec4(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  var at: Place;
  var acc: array<vec4f, 16>;
  if (!product(wid, nwg, li, &at, &acc)) { return; }
  emit_vec4(at, 0u, 0u, acc[0]);  emit_vec4(at, 0u, 1u, acc[1]);
  emit_vec4(at, 1u, 0u, acc[2]);  emit_vec4(at, 1u, 1u, acc[3]);
  emit_vec4(at, 2u, 0u, acc[4]);  emit_vec4(at, 2u, 1u, acc[5]);
  emit_vec4(at, 3u, 0u, acc[6]);  emit_vec4(at, 3u, 1u, acc[7]);
  emit_vec4(at, 4u, 0u, acc[8]);  emit_vec4(at, 4u, 1u, acc[9]);
  emit_vec4(at, 5u, 0u, acc[10]); emit_vec4(at, 5u, 1u, acc[11]);
  emit_vec4(at, 6u, 0u, acc[12]); emit_vec4(at, 6u, 1u, acc[13]);
  emit_vec4(at, 7u, 0u, acc[14]); emit_vec4(at, 7u, 1u, acc[15]);
}
