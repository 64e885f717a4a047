// The tiled f32 matmul (layouts and sizes: common/matmul_params.wgsl), the real GPUs'
// path. Entry points: `main`, the tiled product (VEC_C: C stored as vec4s, else
// element by element; SPLIT_K: workgroup z sums only its run of k, into batch z of C,
// for `split_k_sum` to add up; STREAM: stream-K, each workgroup an even share of the
// K slices of several tiles, into partial tiles for `stream_k_sum`), and
// `main_origins`, the same product in the form the plain layout runs fastest in.
// A and B are read through common/matmul_loads.wgsl.
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

// #include "common/matmul_loads.wgsl"
// #include "common/matmul_epilogue.wgsl"

override TRANS_A: bool = false;
override TRANS_B: bool = false;
override VEC_C: bool = false;    // C's row length, offset and batch stride are multiples of 4
override BASED: bool = true;     // false: one batch, every operand at offset 0
override SPLIT_K: bool = false;  // workgroup z sums its own run of k into batch z of C
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

// [k][m / 4] and [k][n / 4], flattened (WGSL sizes only the outermost array of a
// workgroup variable by override constants), plus room for the skew of the last k-rows.
var<workgroup> tile_a: array<vec4f, BK * AV4 + 8u>;
var<workgroup> tile_b: array<vec4f, BK * BV4 + 8u>;

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
  let stop = min(at + p.k_split, p.tile_count * slices);
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
// faster (kernels/matmul/select.ts). Through store_c, accumulating products ran slower here than in
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
  if (i >= p.tile_count * per_tile) { return; }
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
