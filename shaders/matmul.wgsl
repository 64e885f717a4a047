// Batched matrix multiply, f32:
//   C[b] = act(op(A[b]) @ op(B[b]) + bias)            (C[b] += ... with ACCUM)
// op(A) is A stored [M, K] or, with TRANS_A, A stored [K, M] and read transposed;
// op(B) is B stored [K, N] or, with TRANS_B, B stored [N, K]. All row-major and
// contiguous; batch b starts offset_a + stride_a * b elements into A (likewise B,
// C), so a stride of 0 broadcasts an operand. bias is [N], added to every row. Sizes and
// strides come in the uniform; the variants below are override constants.
//
// Entry points: `main`, the tiled product (below; VEC_C: C stored as vec4s, else
// element by element; SPLIT_K: workgroup z sums only its run of k, into batch z of C,
// for `split_k_sum` to add up; STREAM: stream-K, each workgroup an even share of the
// K slices of several tiles, into partial tiles for `stream_k_sum`), and
// `main_origins`, the same product in the form the
// plain layout runs fastest in (after it); `skinny` for products of a few rows by a weight stored [N, K]
// (decoding, at the end; with `skinny_concat` and `skinny_swiglu`, which fold a decode
// step's neighbouring operations into it); `pack` and `panels` for the software GPU
// (after the tiled kernel). Storage is bound as vec4 arrays either way: VEC_A and
// VEC_B say whether that operand's rows, offset and batch stride are multiples of 4, so a
// 4-element run along a row is one aligned vec4 load; otherwise the 4 elements are
// read one by one.
//
// Tiling: a workgroup of WG_X * WG_Y threads owns a BM x BN = 8*WG_Y x TN*WG_X tile
// of C, each thread an 8 x TN register block (TN 8 or 16) made of two groups of 4
// rows (4*ty and BM/2 + 4*ty) by TN/4 groups of 4 columns (4*tx + h*4*WG_X), so every
// workgroup-memory read in the inner loop is a vec4 and the 32 threads of a warp,
// laid out 8 (n) x 4 (m), read 8 neighbouring B vec4s and 4 neighbouring A vec4s
// (no bank conflicts). The A tile is stored transposed, [k][m], so a thread's 4 rows
// at one k are one vec4; an operand stored with k along its rows (A as stored, B
// transposed) is transposed on its way in, each group of 4 k-rows shifted along by a
// few vec4s (`skew`) so those scalar stores do not collide in a bank. K advances BK (8
// or 16) at a time through one workgroup-memory stage: the next slice is loaded into
// registers while the current one is multiplied, and written after the barrier that
// ends it. The multiply is written out one k at a time (calls with constant k): left as
// a loop, the same kernel ran 8-12% slower on the H200. Workgroups walk output tiles in
// groups of GROUP_M tile rows, so those running at once share A and B panels in L2.

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override VEC_A: bool = false;
override VEC_B: bool = false;
override BIAS: bool = false;
override ACT: u32 = 0u;          // 0 none, 1 silu, 2 gelu (tanh form), 3 relu
override ACCUM: bool = false;
override VEC_C: bool = false;    // C's row length, offset and batch stride are multiples of 4
override BASED: bool = true;     // false: one batch, every operand at offset 0
override SPLIT_K: bool = false;  // workgroup z sums its own run of k into batch z of C
override WHOLE: bool = false;    // M, N and every run of k are multiples of BM, BN, BK: no load bounds checks
override STREAM: bool = false;   // stream-K: workgroup w sums its share of the stream's slices into partial tiles
override WG_X: u32 = 16u;        // threads along N (a multiple of 8)
override WG_Y: u32 = 16u;        // threads along M (a multiple of 4)
override BK: u32 = 16u;          // K slice: 8 or 16
override TN: u32 = 8u;           // columns per thread: 8 or 16

override THREADS = WG_X * WG_Y;
override BM = 8u * WG_Y;
override BN = TN * WG_X;
override GB = TN / 4u;                       // column groups per thread
override KQ = BK / 4u;                       // vec4s across one K slice
override LOADS_A = BM * KQ / THREADS;        // vec4 loads per thread per slice (1-4)
override LOADS_B = BN * KQ / THREADS;
override AV4 = BM / 4u;                      // vec4s in a row of the A tile ([k][m])
override BV4 = BN / 4u;
override WA = select(KQ, AV4, TRANS_A);      // vec4s across one stored row of the A slice
override WB = select(BV4, KQ, TRANS_B);
override A_KROW = select(0u, 1u, TRANS_A);   // 1: k moves along A's stored rows; 0: its columns
override B_KROW = select(1u, 0u, TRANS_B);

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
  k_split: u32,          // SPLIT_K: k per workgroup z, a multiple of BK; STREAM: K slices per workgroup
  tile_base: u32,        // index (in the walk below) of this dispatch's first tile
  stream_tiles: u32,     // STREAM: tiles the stream covers, from tile_base on
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4f>;
@group(0) @binding(2) var<storage, read> b: array<vec4f>;
@group(0) @binding(3) var<storage, read> bias: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

// [k][m / 4] and [k][n / 4], flattened (WGSL sizes only the outermost array of a
// workgroup variable by override constants), plus room for the skew of the last k-rows.
var<workgroup> tile_a: array<vec4f, BK * AV4 + 8u>;
var<workgroup> tile_b: array<vec4f, BK * BV4 + 8u>;

// C for the tiled kernel: vec4 stores with VEC_C, single components otherwise.
@group(0) @binding(4) var<storage, read_write> c4: array<vec4f>;

fn element_a(i: u32) -> f32 { return a[i / 4u][i % 4u]; }
fn element_b(i: u32) -> f32 { return b[i / 4u][i % 4u]; }

// Elements (row, col..col+3) of the row-major [rows, cols] matrix at `base` in A,
// zero outside it. With VEC_A, base and cols are multiples of 4 and so is col, so the
// run is one vec4 whose index is linear in col. One return at the end: with early
// returns and the index as (base + row * cols + col) / 4, a stripped copy of this
// kernel's 128x256 tile ran at 31.8 TFLOP/s on the H200 instead of 44.5.
fn fetch_a(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (VEC_A) {
    if (WHOLE || (row < rows && col < cols)) { v = a[base / 4u + row * (cols / 4u) + col / 4u]; }
  } else {
    for (var j = 0u; j < 4u; j++) {
      if (WHOLE || (row < rows && col + j < cols)) { v[j] = element_a(base + row * cols + col + j); }
    }
  }
  return v;
}

fn fetch_b(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (VEC_B) {
    if (WHOLE || (row < rows && col < cols)) { v = b[base / 4u + row * (cols / 4u) + col / 4u]; }
  } else {
    for (var j = 0u; j < 4u; j++) {
      if (WHOLE || (row < rows && col + j < cols)) { v[j] = element_b(base + row * cols + col + j); }
    }
  }
  return v;
}

// Vec4 u of the A slice starting at k0 in the tile at (m0, n0): 4 elements along a
// stored row, consecutive threads taking consecutive vec4s of a row.
fn load_a(base: u32, m0: u32, k0: u32, u: u32) -> vec4f {
  if (TRANS_A) { return fetch_a(base, k0 + u / AV4, m0 + (u % AV4) * 4u, p.k, p.m); }
  return fetch_a(base, m0 + u / KQ, k0 + (u % KQ) * 4u, p.m, p.k);
}

fn load_b(base: u32, n0: u32, k0: u32, u: u32) -> vec4f {
  if (TRANS_B) { return fetch_b(base, n0 + u / KQ, k0 + (u % KQ) * 4u, p.n, p.k); }
  return fetch_b(base, k0 + u / BV4, n0 + (u % BV4) * 4u, p.k, p.n);
}

// Where an operand is transposed on its way into the tile, the 32 invocations of a
// warp hold 32/KQ consecutive stored rows by KQ runs of 4 k, and their scalar stores
// land on k-rows BM (BN) floats apart, a multiple of the 32 banks: KQ invocations per
// bank. Shifting the k-rows of each run of 4 k by 8/KQ vec4s more than the run before
// spreads them over all 32 (the warp's rows span 8/KQ vec4 columns, and the KQ runs
// land 32/KQ banks apart); the multiply's reads, 8 neighbouring vec4s of one k-row or
// 4 with broadcast, stay conflict-free. The shift is a constant for each k the
// multiply reads, so it folds into the read's address. An XOR of the vec4 column by
// the same amount (the form before) spreads the stores as well, but needed a register
// per k-run for the reads' addresses: H200, MLP forward down projection (B transposed,
// 128x128 tiles), 36.3 TFLOP/s whole and 40.5 streamed with the XOR, 38.0 and 41.9 with
// the shift; the 128x128 loop had 1,176 instructions instead of 1,144 (nvdisasm).
fn skew(k: u32) -> u32 { return (k / 4u) * (8u / KQ); }

// Where the multiply reads a thread's fragments at k = kk: vec4 ty of the A tile's row
// (then ty + WG_Y), vec4 tx of the B tile's (then tx + h WG_X), unshifted where the
// operand went in as stored.
fn a_fragment(kk: u32, ty: u32) -> u32 { return kk * AV4 + select(skew(kk), 0u, TRANS_A) + ty; }
fn b_fragment(kk: u32, tx: u32) -> u32 { return kk * BV4 + select(0u, skew(kk), TRANS_B) + tx; }

// Load u into the tile, transposing A when it is stored with K contiguous.
fn put_a(u: u32, v: vec4f) {
  if (TRANS_A) {
    tile_a[u] = v;
    return;
  }
  let m = u / KQ;
  let k = (u % KQ) * 4u;
  let at = k * AV4 + skew(k) + m / 4u;
  tile_a[at][m % 4u] = v.x;
  tile_a[at + AV4][m % 4u] = v.y;
  tile_a[at + 2u * AV4][m % 4u] = v.z;
  tile_a[at + 3u * AV4][m % 4u] = v.w;
}

fn put_b(u: u32, v: vec4f) {
  if (!TRANS_B) {
    tile_b[u] = v;
    return;
  }
  let n = u / KQ;
  let k = (u % KQ) * 4u;
  let at = k * BV4 + skew(k) + n / 4u;
  tile_b[at][n % 4u] = v.x;
  tile_b[at + BV4][n % 4u] = v.y;
  tile_b[at + 2u * BV4][n % 4u] = v.z;
  tile_b[at + 3u * BV4][n % 4u] = v.w;
}

// One slice's loaded vec4s into the workgroup tiles: a0-a3 of A, b0-b3 of B (those past
// LOADS_A and LOADS_B unused).
fn put_slice(li: u32, a0: vec4f, a1: vec4f, a2: vec4f, a3: vec4f, b0: vec4f, b1: vec4f, b2: vec4f, b3: vec4f) {
  put_a(li, a0);
  if (LOADS_A > 1u) { put_a(li + THREADS, a1); }
  if (LOADS_A > 2u) { put_a(li + 2u * THREADS, a2); }
  if (LOADS_A > 3u) { put_a(li + 3u * THREADS, a3); }
  put_b(li, b0);
  if (LOADS_B > 1u) { put_b(li + THREADS, b1); }
  if (LOADS_B > 2u) { put_b(li + 2u * THREADS, b2); }
  if (LOADS_B > 3u) { put_b(li + 3u * THREADS, b3); }
}

// One k of the slice in the tile, TN 8: acc[4 * i + h] += A[row i] * B[column group h],
// rows 0-3 from a0 and 4-7 from a1.
fn multiply_at(tx: u32, ty: u32, kk: u32, acc: ptr<function, array<vec4f, 32>>) {
  let ia = a_fragment(kk, ty);
  let ib = b_fragment(kk, tx);
  let a0 = tile_a[ia];
  let a1 = tile_a[ia + WG_Y];
  let b0 = tile_b[ib];
  let b1 = tile_b[ib + WG_X];
  (*acc)[0] += a0.x * b0;   (*acc)[1] += a0.x * b1;
  (*acc)[4] += a0.y * b0;   (*acc)[5] += a0.y * b1;
  (*acc)[8] += a0.z * b0;   (*acc)[9] += a0.z * b1;
  (*acc)[12] += a0.w * b0;  (*acc)[13] += a0.w * b1;
  (*acc)[16] += a1.x * b0;  (*acc)[17] += a1.x * b1;
  (*acc)[20] += a1.y * b0;  (*acc)[21] += a1.y * b1;
  (*acc)[24] += a1.z * b0;  (*acc)[25] += a1.z * b1;
  (*acc)[28] += a1.w * b0;  (*acc)[29] += a1.w * b1;
}

// The same for TN 16: every fragment load first, then the products row by row. With
// the third and fourth column groups in a second pass after the first two, the
// 128x256 tile ran at 41.6 TFLOP/s on the H200 instead of 44.8; folded into
// multiply_at behind `if (GB > 2u)`, at 37.0 instead of 44.3 (4096^3, plain layout).
fn multiply_wide_at(tx: u32, ty: u32, kk: u32, acc: ptr<function, array<vec4f, 32>>) {
  let ia = a_fragment(kk, ty);
  let ib = b_fragment(kk, tx);
  let a0 = tile_a[ia];
  let a1 = tile_a[ia + WG_Y];
  let b0 = tile_b[ib];
  let b1 = tile_b[ib + WG_X];
  let b2 = tile_b[ib + 2u * WG_X];
  let b3 = tile_b[ib + 3u * WG_X];
  (*acc)[0] += a0.x * b0;  (*acc)[1] += a0.x * b1;  (*acc)[2] += a0.x * b2;  (*acc)[3] += a0.x * b3;
  (*acc)[4] += a0.y * b0;  (*acc)[5] += a0.y * b1;  (*acc)[6] += a0.y * b2;  (*acc)[7] += a0.y * b3;
  (*acc)[8] += a0.z * b0;  (*acc)[9] += a0.z * b1;  (*acc)[10] += a0.z * b2;  (*acc)[11] += a0.z * b3;
  (*acc)[12] += a0.w * b0;  (*acc)[13] += a0.w * b1;  (*acc)[14] += a0.w * b2;  (*acc)[15] += a0.w * b3;
  (*acc)[16] += a1.x * b0;  (*acc)[17] += a1.x * b1;  (*acc)[18] += a1.x * b2;  (*acc)[19] += a1.x * b3;
  (*acc)[20] += a1.y * b0;  (*acc)[21] += a1.y * b1;  (*acc)[22] += a1.y * b2;  (*acc)[23] += a1.y * b3;
  (*acc)[24] += a1.z * b0;  (*acc)[25] += a1.z * b1;  (*acc)[26] += a1.z * b2;  (*acc)[27] += a1.z * b3;
  (*acc)[28] += a1.w * b0;  (*acc)[29] += a1.w * b1;  (*acc)[30] += a1.w * b2;  (*acc)[31] += a1.w * b3;
}

// The whole slice, one k at a time (calls with constant k).
fn multiply(tx: u32, ty: u32, acc: ptr<function, array<vec4f, 32>>) {
  if (GB > 2u) {
    multiply_wide_at(tx, ty, 0u, acc);  multiply_wide_at(tx, ty, 1u, acc);  multiply_wide_at(tx, ty, 2u, acc);  multiply_wide_at(tx, ty, 3u, acc);
    multiply_wide_at(tx, ty, 4u, acc);  multiply_wide_at(tx, ty, 5u, acc);  multiply_wide_at(tx, ty, 6u, acc);  multiply_wide_at(tx, ty, 7u, acc);
    if (BK > 8u) {
      multiply_wide_at(tx, ty, 8u, acc);  multiply_wide_at(tx, ty, 9u, acc);  multiply_wide_at(tx, ty, 10u, acc);  multiply_wide_at(tx, ty, 11u, acc);
      multiply_wide_at(tx, ty, 12u, acc);  multiply_wide_at(tx, ty, 13u, acc);  multiply_wide_at(tx, ty, 14u, acc);  multiply_wide_at(tx, ty, 15u, acc);
    }
  } else {
    multiply_at(tx, ty, 0u, acc);  multiply_at(tx, ty, 1u, acc);  multiply_at(tx, ty, 2u, acc);  multiply_at(tx, ty, 3u, acc);
    multiply_at(tx, ty, 4u, acc);  multiply_at(tx, ty, 5u, acc);  multiply_at(tx, ty, 6u, acc);  multiply_at(tx, ty, 7u, acc);
    if (BK > 8u) {
      multiply_at(tx, ty, 8u, acc);  multiply_at(tx, ty, 9u, acc);  multiply_at(tx, ty, 10u, acc);  multiply_at(tx, ty, 11u, acc);
      multiply_at(tx, ty, 12u, acc);  multiply_at(tx, ty, 13u, acc);  multiply_at(tx, ty, 14u, acc);  multiply_at(tx, ty, 15u, acc);
    }
  }
}

fn activate(x: vec4f) -> vec4f { return activate_by(x, ACT); }

fn activate_by(x: vec4f, act: u32) -> vec4f {
  switch act {
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

// Row `row`, columns col..col+3 of C: bias, activation, then stored or added (one
// vec4 when VEC_C, element by element otherwise).
fn store_c(base: u32, row: u32, col: u32, sum: vec4f) {
  if (row >= p.m || col >= p.n) { return; }
  var v = sum;
  if (BIAS) {
    if (VEC_C) {
      v += bias[col / 4u];
    } else {
      for (var j = 0u; j < 4u; j++) {
        if (col + j < p.n) { v[j] += bias[(col + j) / 4u][(col + j) % 4u]; }
      }
    }
  }
  v = activate(v);
  let at = base + row * p.n + col;
  if (VEC_C) {
    if (ACCUM) { c4[at / 4u] += v; } else { c4[at / 4u] = v; }
    return;
  }
  for (var j = 0u; j < 4u; j++) {
    if (col + j < p.n) {
      let e = at + j;
      if (ACCUM) { c4[e / 4u][e % 4u] += v[j]; } else { c4[e / 4u][e % 4u] = v[j]; }
    }
  }
}

// C's rows r.. and r + BM/2.. from the register block, through store_c. Shared by
// both entry points: as fast on the H200 as the same stores written out in each
// (every layout and tile the launcher takes, at 4096^3), where a shared helper for the
// tile's origin made one of them 40% slower.
fn store_tile(base_c: u32, r: u32, q: u32, acc: ptr<function, array<vec4f, 32>>) {
  let s = r + BM / 2u;
  let q1 = q + 4u * WG_X;
  store_c(base_c, r, q, (*acc)[0]);         store_c(base_c, r, q1, (*acc)[1]);
  store_c(base_c, r + 1u, q, (*acc)[4]);    store_c(base_c, r + 1u, q1, (*acc)[5]);
  store_c(base_c, r + 2u, q, (*acc)[8]);    store_c(base_c, r + 2u, q1, (*acc)[9]);
  store_c(base_c, r + 3u, q, (*acc)[12]);   store_c(base_c, r + 3u, q1, (*acc)[13]);
  store_c(base_c, s, q, (*acc)[16]);        store_c(base_c, s, q1, (*acc)[17]);
  store_c(base_c, s + 1u, q, (*acc)[20]);   store_c(base_c, s + 1u, q1, (*acc)[21]);
  store_c(base_c, s + 2u, q, (*acc)[24]);   store_c(base_c, s + 2u, q1, (*acc)[25]);
  store_c(base_c, s + 3u, q, (*acc)[28]);   store_c(base_c, s + 3u, q1, (*acc)[29]);
  if (GB > 2u) {
    let q2 = q + 8u * WG_X;
    let q3 = q + 12u * WG_X;
    store_c(base_c, r, q2, (*acc)[2]);        store_c(base_c, r, q3, (*acc)[3]);
    store_c(base_c, r + 1u, q2, (*acc)[6]);   store_c(base_c, r + 1u, q3, (*acc)[7]);
    store_c(base_c, r + 2u, q2, (*acc)[10]);  store_c(base_c, r + 2u, q3, (*acc)[11]);
    store_c(base_c, r + 3u, q2, (*acc)[14]);  store_c(base_c, r + 3u, q3, (*acc)[15]);
    store_c(base_c, s, q2, (*acc)[18]);       store_c(base_c, s, q3, (*acc)[19]);
    store_c(base_c, s + 1u, q2, (*acc)[22]);  store_c(base_c, s + 1u, q3, (*acc)[23]);
    store_c(base_c, s + 2u, q2, (*acc)[26]);  store_c(base_c, s + 2u, q3, (*acc)[27]);
    store_c(base_c, s + 3u, q2, (*acc)[30]);  store_c(base_c, s + 3u, q3, (*acc)[31]);
  }
}

fn tile_index(wid: vec3u, nwg: vec3u) -> u32 { return wid.y * nwg.x + wid.x; }

// STREAM: the thread's block of a partial tile, row-major BM x BN, into slot `slot` of
// the partial sums (bound as C) for `stream_k_sum`.
fn store_partial(slot: u32, tx: u32, ty: u32, acc: ptr<function, array<vec4f, 32>>) {
  let r = slot * BM * BV4 + 4u * ty * BV4 + tx;
  let s = r + (BM / 2u) * BV4;
  c4[r] = (*acc)[0];             c4[r + WG_X] = (*acc)[1];
  c4[r + BV4] = (*acc)[4];       c4[r + BV4 + WG_X] = (*acc)[5];
  c4[r + 2u * BV4] = (*acc)[8];  c4[r + 2u * BV4 + WG_X] = (*acc)[9];
  c4[r + 3u * BV4] = (*acc)[12]; c4[r + 3u * BV4 + WG_X] = (*acc)[13];
  c4[s] = (*acc)[16];            c4[s + WG_X] = (*acc)[17];
  c4[s + BV4] = (*acc)[20];      c4[s + BV4 + WG_X] = (*acc)[21];
  c4[s + 2u * BV4] = (*acc)[24]; c4[s + 2u * BV4 + WG_X] = (*acc)[25];
  c4[s + 3u * BV4] = (*acc)[28]; c4[s + 3u * BV4 + WG_X] = (*acc)[29];
  if (GB > 2u) {
    let h2 = 2u * WG_X;
    let h3 = 3u * WG_X;
    c4[r + h2] = (*acc)[2];             c4[r + h3] = (*acc)[3];
    c4[r + BV4 + h2] = (*acc)[6];       c4[r + BV4 + h3] = (*acc)[7];
    c4[r + 2u * BV4 + h2] = (*acc)[10]; c4[r + 2u * BV4 + h3] = (*acc)[11];
    c4[r + 3u * BV4 + h2] = (*acc)[14]; c4[r + 3u * BV4 + h3] = (*acc)[15];
    c4[s + h2] = (*acc)[18];            c4[s + h3] = (*acc)[19];
    c4[s + BV4 + h2] = (*acc)[22];      c4[s + BV4 + h3] = (*acc)[23];
    c4[s + 2u * BV4 + h2] = (*acc)[26]; c4[s + 2u * BV4 + h3] = (*acc)[27];
    c4[s + 3u * BV4 + h2] = (*acc)[30]; c4[s + 3u * BV4 + h3] = (*acc)[31];
  }
}

// Its loop written flat, values passed rather than pointers: spread over helpers that
// filled a struct of the tile's coordinates and the staged slice through pointers, the
// same kernel ran at 33 TFLOP/s on the H200 (128x128/k8; 26 on 128x256) where it now
// runs at 37 (36-38).
//
// Stream-K (STREAM): where an output has fewer tiles than the GPU runs at once, or a
// last round of them that leaves most of it idle, the stream's tiles' K slices are laid
// end to end (tile by tile) and cut into equal shares of p.k_split slices, one per
// workgroup, at most one tile long, so each share covers the end of one tile and the
// start of the next, or part of one: at most two segments. Each segment's sums go to
// the partial tile in slot 2w + segment, which `stream_k_sum` adds up.
@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let tiles_n = p.tiles_n;
  let batch = p.batch_base + wid.z;
  // Without BASED the bases are the constant 0, two live values fewer in the loop:
  // 38.4 -> 39.7 TFLOP/s for 128x128/k16 on the H200 (37.9 -> 44.5 for a stripped
  // copy of the 128x256 tile, which runs at the edge of the register file).
  let base_a = select(0u, p.offset_a + batch * p.stride_a, BASED);
  let base_b = select(0u, p.offset_b + batch * p.stride_b, BASED);
  let warp = li / 32u;
  let lane = li % 32u;
  let tx = (warp % (WG_X / 8u)) * 8u + lane % 8u;
  let ty = (warp / (WG_X / 8u)) * 4u + lane / 8u;
  let share = tile_index(wid, nwg);
  let slices = (p.k + BK - 1u) / BK;
  var at = share * p.k_split;
  let stop = min(at + p.k_split, p.stream_tiles * slices);
  var acc: array<vec4f, 32>;

  for (var segment = 0u; segment < select(1u, 2u, STREAM); segment++) {
    var tile: u32;
    var k_begin: u32;
    var steps: u32;
    if (STREAM) {
      if (at >= stop) { break; }
      tile = p.tile_base + at / slices;
      k_begin = (at % slices) * BK;
      steps = min(slices - at % slices, stop - at);
      at += steps;
    } else {
      tile = p.tile_base + share;
      if (tile >= p.tiles_m * tiles_n) { return; }
      // SPLIT_K: this workgroup's run of k starts at a multiple of BK, so no slice
      // reaches into the next run; the last run ends at p.k like an unsplit product.
      k_begin = select(0u, wid.z * p.k_split, SPLIT_K);
      steps = (select(p.k, min(k_begin + p.k_split, p.k), SPLIT_K) - k_begin + BK - 1u) / BK;
    }
    let per_group = GROUP_M * tiles_n;
    let first_m = (tile / per_group) * GROUP_M;
    let group_m = min(p.tiles_m - first_m, GROUP_M);
    let in_group = tile % per_group;
    let m0 = (first_m + in_group % group_m) * BM;
    let n0 = (in_group / group_m) * BN;

    // Zeroed by assignment: declared here, in the loop, its zero initialiser did not run
    // again on the H200 (Vulkan), whose second segments started from the first one's
    // sums; the software GPU (OpenGL) re-zeroed it.
    acc = array<vec4f, 32>();
    // The slice in flight; the load blocks below are the same code (the first slice,
    // then slice t + 1 while slice t is multiplied).
    var a0: vec4f; var a1: vec4f; var a2: vec4f; var a3: vec4f;
    var b0: vec4f; var b1: vec4f; var b2: vec4f; var b3: vec4f;
    a0 = load_a(base_a, m0, k_begin, li);
    if (LOADS_A > 1u) { a1 = load_a(base_a, m0, k_begin, li + THREADS); }
    if (LOADS_A > 2u) { a2 = load_a(base_a, m0, k_begin, li + 2u * THREADS); }
    if (LOADS_A > 3u) { a3 = load_a(base_a, m0, k_begin, li + 3u * THREADS); }
    b0 = load_b(base_b, n0, k_begin, li);
    if (LOADS_B > 1u) { b1 = load_b(base_b, n0, k_begin, li + THREADS); }
    if (LOADS_B > 2u) { b2 = load_b(base_b, n0, k_begin, li + 2u * THREADS); }
    if (LOADS_B > 3u) { b3 = load_b(base_b, n0, k_begin, li + 3u * THREADS); }
    for (var t = 0u; t < steps; t++) {
      put_slice(li, a0, a1, a2, a3, b0, b1, b2, b3);
      // The next slice, fetched before the barrier. With WHOLE every load is in bounds, so
      // it is fetched unconditionally (the last step fetches its own slice again, unused),
      // with no register copies for a branch's two outcomes. The driver's compiler places
      // these loads three quarters into the multiply wherever they are written (nvdisasm
      // of its pipeline cache), but schedules the rest better from here: H200, the MLP's
      // forward down projection in 4 runs, 40.3 TFLOP/s; 35.8 with the loads written
      // after the barrier; 38.9 bounds-checked, after it. Bounds-checked products lose
      // 2-6% here against after the barrier (no Qwen2.5-0.5B product is one; the bundled
      // model's 780-row LM head is).
      if (WHOLE || t + 1u < steps) {
        let k0 = k_begin + min(t + 1u, steps - 1u) * BK;
        a0 = load_a(base_a, m0, k0, li);
        if (LOADS_A > 1u) { a1 = load_a(base_a, m0, k0, li + THREADS); }
        if (LOADS_A > 2u) { a2 = load_a(base_a, m0, k0, li + 2u * THREADS); }
        if (LOADS_A > 3u) { a3 = load_a(base_a, m0, k0, li + 3u * THREADS); }
        b0 = load_b(base_b, n0, k0, li);
        if (LOADS_B > 1u) { b1 = load_b(base_b, n0, k0, li + THREADS); }
        if (LOADS_B > 2u) { b2 = load_b(base_b, n0, k0, li + 2u * THREADS); }
        if (LOADS_B > 3u) { b3 = load_b(base_b, n0, k0, li + 3u * THREADS); }
      }
      workgroupBarrier();
      multiply(tx, ty, &acc);
      workgroupBarrier();
    }

    if (STREAM) {
      store_partial(2u * share + segment, tx, ty, &acc);
    } else {
      // Register row i is C row r + i (i < 4) or r + BM/2 + i - 4; column group h starts
      // at column q + 4 h WG_X. Constant indices throughout, so acc stays in registers.
      let base_c = select(0u, p.offset_c + batch * p.stride_c, BASED || SPLIT_K);
      store_tile(base_c, m0 + 4u * ty, n0 + 4u * tx, &acc);
    }
  }
}

// The same product for plain outputs (C overwritten, stored as vec4s: no bias,
// activation, accumulation or SPLIT_K), each operand's loads addressed from an origin
// set once (no layout branch per load) and C stored inline. Measured on the H200
// (4096^3, plain layout, 128x256 tile): 44.7 TFLOP/s against `main`'s 38.0, and 38.6
// against 33.3 on the MLP's dX; but with B stored [N, K] 35.0 against 42.7, and no
// better with A stored [K, M] (40.0 against 41.4 for `main`'s 128x128). Neither half
// alone moved the plain layout (38.1 either way), and the same code behind constant
// branches inside `main` did not either: the driver's compiler makes different
// machine code of equal programs, so each layout takes the entry point that measured
// faster (matmul.ts). Through store_c, accumulating products ran slower here than in
// `main` (the LM head's dX chunk, 4096 x 896 x 8192: 34.2 against 38.3), and so did
// SPLIT_K (4096^3 at 128x128 in two runs:
// 37.7 against 40.0).
@compute @workgroup_size(THREADS)
fn main_origins(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let tile = p.tile_base + tile_index(wid, nwg);
  let tiles_n = p.tiles_n;
  if (tile >= p.tiles_m * tiles_n) { return; }
  let per_group = GROUP_M * tiles_n;
  let first_m = (tile / per_group) * GROUP_M;
  let group_m = min(p.tiles_m - first_m, GROUP_M);
  let in_group = tile % per_group;
  let m0 = (first_m + in_group % group_m) * BM;
  let n0 = (in_group / group_m) * BN;
  let batch = p.batch_base + wid.z;
  let base_a = select(0u, p.offset_a + batch * p.stride_a, BASED);
  let base_b = select(0u, p.offset_b + batch * p.stride_b, BASED);
  let warp = li / 32u;
  let lane = li % 32u;
  let tx = (warp % (WG_X / 8u)) * 8u + lane % 8u;
  let ty = (warp / (WG_X / 8u)) * 4u + lane / 8u;
  // Each operand's slice is a block of its stored rows: its first vec4 at (row, col)
  // = origin + k0 along one axis, the thread's vec4s after it in rows of WA (WB).
  let a_r = select(m0, 0u, TRANS_A);
  let a_c = select(0u, m0, TRANS_A);
  let a_rows = select(p.m, p.k, TRANS_A);
  let a_cols = select(p.k, p.m, TRANS_A);
  let b_r = select(0u, n0, TRANS_B);
  let b_c = select(n0, 0u, TRANS_B);
  let b_rows = select(p.k, p.n, TRANS_B);
  let b_cols = select(p.n, p.k, TRANS_B);

  var acc: array<vec4f, 32>;
  var a0: vec4f; var a1: vec4f; var a2: vec4f; var a3: vec4f;
  var b0: vec4f; var b1: vec4f; var b2: vec4f; var b3: vec4f;
  let steps = (p.k + BK - 1u) / BK;
  a0 = fetch_a(base_a, a_r + 0u * A_KROW + (li) / WA, a_c + 0u * (1u - A_KROW) + ((li) % WA) * 4u, a_rows, a_cols);
  if (LOADS_A > 1u) { a1 = fetch_a(base_a, a_r + 0u * A_KROW + (li + THREADS) / WA, a_c + 0u * (1u - A_KROW) + ((li + THREADS) % WA) * 4u, a_rows, a_cols); }
  if (LOADS_A > 2u) { a2 = fetch_a(base_a, a_r + 0u * A_KROW + (li + 2u * THREADS) / WA, a_c + 0u * (1u - A_KROW) + ((li + 2u * THREADS) % WA) * 4u, a_rows, a_cols); }
  if (LOADS_A > 3u) { a3 = fetch_a(base_a, a_r + 0u * A_KROW + (li + 3u * THREADS) / WA, a_c + 0u * (1u - A_KROW) + ((li + 3u * THREADS) % WA) * 4u, a_rows, a_cols); }
  b0 = fetch_b(base_b, b_r + 0u * B_KROW + (li) / WB, b_c + 0u * (1u - B_KROW) + ((li) % WB) * 4u, b_rows, b_cols);
  if (LOADS_B > 1u) { b1 = fetch_b(base_b, b_r + 0u * B_KROW + (li + THREADS) / WB, b_c + 0u * (1u - B_KROW) + ((li + THREADS) % WB) * 4u, b_rows, b_cols); }
  if (LOADS_B > 2u) { b2 = fetch_b(base_b, b_r + 0u * B_KROW + (li + 2u * THREADS) / WB, b_c + 0u * (1u - B_KROW) + ((li + 2u * THREADS) % WB) * 4u, b_rows, b_cols); }
  if (LOADS_B > 3u) { b3 = fetch_b(base_b, b_r + 0u * B_KROW + (li + 3u * THREADS) / WB, b_c + 0u * (1u - B_KROW) + ((li + 3u * THREADS) % WB) * 4u, b_rows, b_cols); }
  for (var t = 0u; t < steps; t++) {
    put_slice(li, a0, a1, a2, a3, b0, b1, b2, b3);
    // The next slice, as in `main`.
    if (WHOLE || t + 1u < steps) {
      let k0 = min(t + 1u, steps - 1u) * BK;
      a0 = fetch_a(base_a, a_r + k0 * A_KROW + (li) / WA, a_c + k0 * (1u - A_KROW) + ((li) % WA) * 4u, a_rows, a_cols);
      if (LOADS_A > 1u) { a1 = fetch_a(base_a, a_r + k0 * A_KROW + (li + THREADS) / WA, a_c + k0 * (1u - A_KROW) + ((li + THREADS) % WA) * 4u, a_rows, a_cols); }
      if (LOADS_A > 2u) { a2 = fetch_a(base_a, a_r + k0 * A_KROW + (li + 2u * THREADS) / WA, a_c + k0 * (1u - A_KROW) + ((li + 2u * THREADS) % WA) * 4u, a_rows, a_cols); }
      if (LOADS_A > 3u) { a3 = fetch_a(base_a, a_r + k0 * A_KROW + (li + 3u * THREADS) / WA, a_c + k0 * (1u - A_KROW) + ((li + 3u * THREADS) % WA) * 4u, a_rows, a_cols); }
      b0 = fetch_b(base_b, b_r + k0 * B_KROW + (li) / WB, b_c + k0 * (1u - B_KROW) + ((li) % WB) * 4u, b_rows, b_cols);
      if (LOADS_B > 1u) { b1 = fetch_b(base_b, b_r + k0 * B_KROW + (li + THREADS) / WB, b_c + k0 * (1u - B_KROW) + ((li + THREADS) % WB) * 4u, b_rows, b_cols); }
      if (LOADS_B > 2u) { b2 = fetch_b(base_b, b_r + k0 * B_KROW + (li + 2u * THREADS) / WB, b_c + k0 * (1u - B_KROW) + ((li + 2u * THREADS) % WB) * 4u, b_rows, b_cols); }
      if (LOADS_B > 3u) { b3 = fetch_b(base_b, b_r + k0 * B_KROW + (li + 3u * THREADS) / WB, b_c + k0 * (1u - B_KROW) + ((li + 3u * THREADS) % WB) * 4u, b_rows, b_cols); }
    }
    workgroupBarrier();
    multiply(tx, ty, &acc);
    workgroupBarrier();
  }
  let base_c = select(0u, p.offset_c + batch * p.stride_c, BASED);
  let r = m0 + 4u * ty;
  let s = r + BM / 2u;
  let q = n0 + 4u * tx;
  // C stored inline, not through store_c (see above).
  let q1 = q + 4u * WG_X;
  if (r < p.m && q < p.n) { c4[(base_c + (r) * p.n + q) / 4u] = acc[0]; }  if (r < p.m && q1 < p.n) { c4[(base_c + (r) * p.n + q1) / 4u] = acc[1]; }
  if (r + 1u < p.m && q < p.n) { c4[(base_c + (r + 1u) * p.n + q) / 4u] = acc[4]; }  if (r + 1u < p.m && q1 < p.n) { c4[(base_c + (r + 1u) * p.n + q1) / 4u] = acc[5]; }
  if (r + 2u < p.m && q < p.n) { c4[(base_c + (r + 2u) * p.n + q) / 4u] = acc[8]; }  if (r + 2u < p.m && q1 < p.n) { c4[(base_c + (r + 2u) * p.n + q1) / 4u] = acc[9]; }
  if (r + 3u < p.m && q < p.n) { c4[(base_c + (r + 3u) * p.n + q) / 4u] = acc[12]; }  if (r + 3u < p.m && q1 < p.n) { c4[(base_c + (r + 3u) * p.n + q1) / 4u] = acc[13]; }
  if (s < p.m && q < p.n) { c4[(base_c + (s) * p.n + q) / 4u] = acc[16]; }  if (s < p.m && q1 < p.n) { c4[(base_c + (s) * p.n + q1) / 4u] = acc[17]; }
  if (s + 1u < p.m && q < p.n) { c4[(base_c + (s + 1u) * p.n + q) / 4u] = acc[20]; }  if (s + 1u < p.m && q1 < p.n) { c4[(base_c + (s + 1u) * p.n + q1) / 4u] = acc[21]; }
  if (s + 2u < p.m && q < p.n) { c4[(base_c + (s + 2u) * p.n + q) / 4u] = acc[24]; }  if (s + 2u < p.m && q1 < p.n) { c4[(base_c + (s + 2u) * p.n + q1) / 4u] = acc[25]; }
  if (s + 3u < p.m && q < p.n) { c4[(base_c + (s + 3u) * p.n + q) / 4u] = acc[28]; }  if (s + 3u < p.m && q1 < p.n) { c4[(base_c + (s + 3u) * p.n + q1) / 4u] = acc[29]; }
  if (GB > 2u) {
    let q2 = q + 8u * WG_X;
    let q3 = q + 12u * WG_X;
    if (r < p.m && q2 < p.n) { c4[(base_c + (r) * p.n + q2) / 4u] = acc[2]; }  if (r < p.m && q3 < p.n) { c4[(base_c + (r) * p.n + q3) / 4u] = acc[3]; }
    if (r + 1u < p.m && q2 < p.n) { c4[(base_c + (r + 1u) * p.n + q2) / 4u] = acc[6]; }  if (r + 1u < p.m && q3 < p.n) { c4[(base_c + (r + 1u) * p.n + q3) / 4u] = acc[7]; }
    if (r + 2u < p.m && q2 < p.n) { c4[(base_c + (r + 2u) * p.n + q2) / 4u] = acc[10]; }  if (r + 2u < p.m && q3 < p.n) { c4[(base_c + (r + 2u) * p.n + q3) / 4u] = acc[11]; }
    if (r + 3u < p.m && q2 < p.n) { c4[(base_c + (r + 3u) * p.n + q2) / 4u] = acc[14]; }  if (r + 3u < p.m && q3 < p.n) { c4[(base_c + (r + 3u) * p.n + q3) / 4u] = acc[15]; }
    if (s < p.m && q2 < p.n) { c4[(base_c + (s) * p.n + q2) / 4u] = acc[18]; }  if (s < p.m && q3 < p.n) { c4[(base_c + (s) * p.n + q3) / 4u] = acc[19]; }
    if (s + 1u < p.m && q2 < p.n) { c4[(base_c + (s + 1u) * p.n + q2) / 4u] = acc[22]; }  if (s + 1u < p.m && q3 < p.n) { c4[(base_c + (s + 1u) * p.n + q3) / 4u] = acc[23]; }
    if (s + 2u < p.m && q2 < p.n) { c4[(base_c + (s + 2u) * p.n + q2) / 4u] = acc[26]; }  if (s + 2u < p.m && q3 < p.n) { c4[(base_c + (s + 2u) * p.n + q3) / 4u] = acc[27]; }
    if (s + 3u < p.m && q2 < p.n) { c4[(base_c + (s + 3u) * p.n + q2) / 4u] = acc[30]; }  if (s + 3u < p.m && q3 < p.n) { c4[(base_c + (s + 3u) * p.n + q3) / 4u] = acc[31]; }
  }
}

// ---- Split-K's sum ----
//
// C = act(sum over z < p.k of P[z] + bias) (C += ... with ACCUM): P, bound as `a`, is
// the [p.k, m, n] partial sums a SPLIT_K product wrote, n a multiple of 4. One
// invocation per vec4 of C, adding the runs in order (so the result does not depend on
// scheduling), then the tiled kernel's epilogue.
@compute @workgroup_size(256)
fn split_k_sum(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n4 = p.n / 4u;
  let plane = p.m * n4;
  let i = (wid.y * nwg.x + wid.x) * 256u + li;
  if (i >= plane) { return; }
  var sum = a[i];
  for (var z = 1u; z < p.k; z++) { sum += a[z * plane + i]; }
  store_c(p.offset_c, i / n4, (i % n4) * 4u, sum);
}

// ---- Stream-K's sum ----
//
// C = act(partial sums + bias) (C += ... with ACCUM) for the stream's tiles: the
// partial tiles, bound as `a`, in the slots `main` with STREAM wrote (BM x BN floats
// each, row-major, slot 2w + segment for share w). Tile t's slices are t * slices ..
// (t + 1) * slices - 1 of the stream; the shares that cover them wrote it as their
// first segment, or as their second where they began in the tile before. One invocation
// per vec4 of a stream tile, adding the shares in order (the result does not depend on
// scheduling), then the tiled kernel's epilogue. Overrides WG_X, WG_Y, TN and BK as for
// the product.
@compute @workgroup_size(256)
fn stream_k_sum(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let per_tile = BM * BV4;
  let i = (wid.y * nwg.x + wid.x) * 256u + li;
  if (i >= p.stream_tiles * per_tile) { return; }
  let t = i / per_tile;
  let e = i % per_tile;
  let slices = (p.k + BK - 1u) / BK;
  let first = t * slices;
  let last = first + slices - 1u;
  var sum = vec4f(0.0);
  for (var w = first / p.k_split; w <= last / p.k_split; w++) {
    sum += a[(2u * w + select(0u, 1u, w * p.k_split < first)) * per_tile + e];
  }
  // The tile's origin by `main`'s walk (written out in each entry point; see store_tile).
  let tile = p.tile_base + t;
  let per_group = GROUP_M * p.tiles_n;
  let first_m = (tile / per_group) * GROUP_M;
  let group_m = min(p.tiles_m - first_m, GROUP_M);
  let in_group = tile % per_group;
  let m0 = (first_m + in_group % group_m) * BM;
  let n0 = (in_group / group_m) * BN;
  store_c(p.offset_c, m0 + e / BV4, n0 + (e % BV4) * 4u, sum);
}

// ---- Uniform panels: the software GPU's path ----
//
// llvmpipe (Mesa's CPU rasteriser, what compatibility mode runs on) executes 8
// invocations as SIMD lanes. A load from a storage or workgroup array assembles its
// vector one lane at a time through the stack, a store-forwarding stall per float
// (measured on Mesa 22.3: 118 ns per 8-lane vec4 load), while a load from a uniform
// buffer is a register gather (10 ns). The tiled kernel above is bound by such loads
// whatever its tile (1.3 GFLOP/s for every tile on 1600x256x768). Here `pack` first
// copies each operand, once, into 64 KiB panels of pr rows (of C's rows for A, of
// C's columns for B) by kc consecutive k, zero-padded, and `panels` multiplies an A
// panel by a B panel, both bound as uniform-buffer windows, each invocation
// accumulating an 8x16 block of C in registers (8-10 GFLOP/s on the same shape; 8x8
// blocks were no faster, 16x16 slower). The launcher dispatches `panels` per (A panel,
// B panel, two K chunks); chunks after those add to the partial sums in C, and the
// last applies bias and activation.

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

// ---- Skinny products: a few rows by a weight, for decoding ----
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
      let w = b[wb + q];
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
// Weight 0 is `b` (binding 2); A is `a` (binding 1), both at offset 0.
@group(0) @binding(3) var<storage, read> b1: array<vec4f>;
@group(0) @binding(4) var<storage, read> b2: array<vec4f>;
@group(0) @binding(5) var<storage, read> bias0: array<f32>;
@group(0) @binding(6) var<storage, read> bias1: array<f32>;
@group(0) @binding(7) var<storage, read> bias2: array<f32>;
@group(0) @binding(8) var<storage, read_write> c_concat: array<f32>;

fn concat_weight(w: u32, i: u32) -> vec4f {
  switch w {
    case 0u: { return b[i]; }
    case 1u: { return b1[i]; }
    default: { return b2[i]; }
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

// Gate weight `b`, up weight `b1`, output `c` (binding 4).
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
      var wg = b[wb + q];
      var wu = b1[wb + q];
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
