// Flash attention: causal, grouped-query, left padding, KV-cache offsets.
//   forward:      o = softmax(scale * q k^T + mask) v, and lse = the row log-sum-exp
//   delta:        delta[i] = rowsum(dO[i] * o[i])                  (backward prologue)
//   backward_dkv: dk, dv of one key tile, summed over the query heads of its kv head
//   backward_dq:  dq of one query tile
// Layout, contiguous row-major: q, o, dq, dO [B, Hq, Tq, HD]; k, v, dk, dv
// [B, Hkv, S_cap, HD] whose first S rows hold keys; lse, delta [B, Hq, Tq]; pad_left
// [B] i32. Query head h reads kv head h / group (group = Hq / Hkv). Query row i sits at
// absolute position q_offset + i (a prefill has q_offset 0; a decode step attends from
// the last Tq positions to the whole cache, q_offset = S - Tq). Key j is visible to
// row i when pad <= j, pad <= q_offset + i and, if causal, j <= q_offset + i. Rows
// without a visible key (left padding) get o = 0, lse = 0 and zero gradients.
// Tiling: one workgroup per (tile of BR query rows or BC keys, head, batch row). The
// q, k, v, dO tiles sit in workgroup memory with rows padded to HD + 1 floats (score
// loops read HD-strided rows across invocations; the pad spreads them over banks), and
// scores go through one BR x BC tile, so no T x T matrix ever reaches global memory.
// WGSL has no float atomics, so each workgroup owns what it writes: backward_dkv loops
// over the query tiles of every query head sharing its kv head, backward_dq over key
// tiles, both recomputing P = exp(s - lse). Invocations keep ceil(rows * HD / WG)
// output accumulators (at most MAX_ACC); the launcher sizes BR, BC and WG to fit.

override HD: u32 = 64u;
override BR: u32 = 16u;
override BC: u32 = 16u;
override WG: u32 = 256u;
override HDP: u32 = HD + 1u;
override N_S: u32 = (BR * BC + WG - 1u) / WG;
override N_Q: u32 = (BR * HD + WG - 1u) / WG;
override N_K: u32 = (BC * HD + WG - 1u) / WG;
const MAX_ACC: u32 = 16u;

// #include "common/attention_mask.wgsl"

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

@group(0) @binding(5) var<storage, read> d_o: array<f32>;
@group(0) @binding(6) var<storage, read> lse_in: array<f32>;
@group(0) @binding(7) var<storage, read> delta_in: array<f32>;
@group(0) @binding(8) var<storage, read_write> grad_qk: array<f32>;
@group(0) @binding(9) var<storage, read_write> grad_v: array<f32>;

var<workgroup> tile_q: array<f32, BR * HDP>;   // q * scale
var<workgroup> tile_do: array<f32, BR * HDP>;
var<workgroup> tile_k: array<f32, BC * HDP>;
var<workgroup> tile_v: array<f32, BC * HDP>;
var<workgroup> tile_s: array<f32, BR * BC>;    // scores, then P, then dS
var<workgroup> row_m: array<f32, BR>;
var<workgroup> row_l: array<f32, BR>;
var<workgroup> row_alpha: array<f32, BR>;
var<workgroup> row_lse: array<f32, BR>;
var<workgroup> row_delta: array<f32, BR>;

// Query tile rows r0.. of the head whose row 0 starts at `base`, pre-scaled.
fn load_q(tid: u32, base: u32, r0: u32) {
  for (var e = tid; e < BR * HD; e += WG) {
    let r = e / HD;
    let d = e % HD;
    var x = 0.0;
    if (r0 + r < p.tq) { x = q[base + (r0 + r) * HD + d] * p.scale; }
    tile_q[r * HDP + d] = x;
  }
}

fn load_do(tid: u32, base: u32, r0: u32) {
  for (var e = tid; e < BR * HD; e += WG) {
    let r = e / HD;
    let d = e % HD;
    var x = 0.0;
    if (r0 + r < p.tq) { x = d_o[base + (r0 + r) * HD + d]; }
    tile_do[r * HDP + d] = x;
  }
}

fn load_kv(tid: u32, base: u32, c0: u32) {
  for (var e = tid; e < BC * HD; e += WG) {
    let c = e / HD;
    let d = e % HD;
    var kx = 0.0;
    var vx = 0.0;
    if (c0 + c < p.s) {
      kx = k[base + (c0 + c) * HD + d];
      vx = v[base + (c0 + c) * HD + d];
    }
    tile_k[c * HDP + d] = kx;
    tile_v[c * HDP + d] = vx;
  }
}

fn load_rows(tid: u32, row0: u32, r0: u32) {
  for (var r = tid; r < BR; r += WG) {
    var l = 0.0;
    var dl = 0.0;
    if (r0 + r < p.tq) {
      l = lse_in[row0 + r0 + r];
      dl = delta_in[row0 + r0 + r];
    }
    row_lse[r] = l;
    row_delta[r] = dl;
  }
}

fn qk(r: u32, c: u32) -> f32 {
  var acc = 0.0;
  for (var d = 0u; d < HD; d++) { acc += tile_q[r * HDP + d] * tile_k[c * HDP + d]; }
  return acc;
}

fn dov(r: u32, c: u32) -> f32 {
  var acc = 0.0;
  for (var d = 0u; d < HD; d++) { acc += tile_do[r * HDP + d] * tile_v[c * HDP + d]; }
  return acc;
}

// Query rows [start, end) that can see the key tile at c0 (backward's dK/dV passes):
// absolute position >= max(c0, pad); start is tile-aligned.
fn query_rows(c0: u32, pad: u32) -> vec2u {
  var first = max(c0, pad);
  var r_start = 0u;
  if (p.causal == 0u) { first = pad; }
  if (first > p.q_offset) { r_start = ((first - p.q_offset) / BR) * BR; }
  var r_end = p.tq;
  if (c0 + BC <= pad || c0 >= p.s) { r_end = 0u; }
  return vec2u(r_start, r_end);
}

// P for (r, c) of the query tile at r0 against the key tile at c0 (backward).
fn prob(r: u32, c: u32, r0: u32, c0: u32, pad: u32) -> f32 {
  if (!visible(r0 + r, c0 + c, pad)) { return 0.0; }
  return exp(qk(r, c) - row_lse[r]);
}

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let b = wid.z;
  let h = wid.y;
  let r0 = wid.x * BR;
  let row0 = (b * p.hq + h) * p.tq;
  let kbase = (b * p.hkv + h / p.group) * p.s_cap * HD;
  let pad = pad_of(b);
  load_q(tid, row0 * HD, r0);
  for (var r = tid; r < BR; r += WG) {
    row_m[r] = MASKED;
    row_l[r] = 0.0;
  }
  var acc: array<f32, MAX_ACC>;
  let range = key_range(r0, pad);
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    load_kv(tid, kbase, c0);
    workgroupBarrier();
    for (var n = 0u; n < N_S; n++) {
      let e = tid + n * WG;
      if (e < BR * BC) {
        let r = e / BC;
        let c = e % BC;
        var sc = MASKED;
        if (visible(r0 + r, c0 + c, pad)) { sc = qk(r, c); }
        tile_s[e] = sc;
      }
    }
    workgroupBarrier();
    for (var r = tid; r < BR; r += WG) {
      let m_old = row_m[r];
      var m = m_old;
      for (var c = 0u; c < BC; c++) { m = max(m, tile_s[r * BC + c]); }
      var sum = 0.0;
      for (var c = 0u; c < BC; c++) {
        let sc = tile_s[r * BC + c];
        let pr = select(0.0, exp(sc - m), sc > MASKED);
        tile_s[r * BC + c] = pr;
        sum += pr;
      }
      let alpha = exp(m_old - m);
      row_alpha[r] = alpha;
      row_l[r] = row_l[r] * alpha + sum;
      row_m[r] = m;
    }
    workgroupBarrier();
    for (var n = 0u; n < N_Q; n++) {
      let e = tid + n * WG;
      if (e < BR * HD) {
        let r = e / HD;
        let d = e % HD;
        var pv = 0.0;
        for (var c = 0u; c < BC; c++) { pv += tile_s[r * BC + c] * tile_v[c * HDP + d]; }
        acc[n] = acc[n] * row_alpha[r] + pv;
      }
    }
  }
  workgroupBarrier();
  for (var n = 0u; n < N_Q; n++) {
    let e = tid + n * WG;
    let r = e / HD;
    if (e < BR * HD && r0 + r < p.tq) {
      let l = row_l[r];
      o[(row0 + r0) * HD + e] = select(0.0, acc[n] / l, l > 0.0);
    }
  }
  for (var r = tid; r < BR; r += WG) {
    if (r0 + r < p.tq) {
      let l = row_l[r];
      lse[row0 + r0 + r] = select(0.0, row_m[r] + log(l), l > 0.0);
    }
  }
}

@group(0) @binding(1) var<storage, read> o_in: array<f32>;
@group(0) @binding(2) var<storage, read> do_in: array<f32>;
@group(0) @binding(3) var<storage, read_write> delta_out: array<f32>;

@compute @workgroup_size(256)
fn delta(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + tid;
  if (i >= p.rows) { return; }
  var acc = 0.0;
  for (var d = 0u; d < HD; d++) { acc += o_in[i * HD + d] * do_in[i * HD + d]; }
  delta_out[i] = acc;
}

@compute @workgroup_size(WG)
fn backward_dkv(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let b = wid.z;
  let hk = wid.y;
  let c0 = wid.x * BC;
  let kbase = (b * p.hkv + hk) * p.s_cap * HD;
  let pad = pad_of(b);
  load_kv(tid, kbase, c0);
  var dk: array<f32, MAX_ACC>;
  var dv: array<f32, MAX_ACC>;
  let rows = query_rows(c0, pad);
  for (var g = 0u; g < p.group; g++) {
    let row0 = (b * p.hq + hk * p.group + g) * p.tq;
    for (var r0 = rows.x; r0 < rows.y; r0 += BR) {
      workgroupBarrier();
      load_q(tid, row0 * HD, r0);
      load_do(tid, row0 * HD, r0);
      load_rows(tid, row0, r0);
      workgroupBarrier();
      for (var n = 0u; n < N_S; n++) {
        let e = tid + n * WG;
        if (e < BR * BC) { tile_s[e] = prob(e / BC, e % BC, r0, c0, pad); }
      }
      workgroupBarrier();
      for (var n = 0u; n < N_K; n++) {
        let e = tid + n * WG;
        if (e < BC * HD) {
          let c = e / HD;
          let d = e % HD;
          var acc = 0.0;
          for (var r = 0u; r < BR; r++) { acc += tile_s[r * BC + c] * tile_do[r * HDP + d]; }
          dv[n] += acc;
        }
      }
      workgroupBarrier();
      for (var n = 0u; n < N_S; n++) {
        let e = tid + n * WG;
        if (e < BR * BC) {
          let pr = tile_s[e];
          if (pr != 0.0) { tile_s[e] = pr * (dov(e / BC, e % BC) - row_delta[e / BC]); }
        }
      }
      workgroupBarrier();
      // tile_q holds q * scale, so this is already dS^T q * scale.
      for (var n = 0u; n < N_K; n++) {
        let e = tid + n * WG;
        if (e < BC * HD) {
          let c = e / HD;
          let d = e % HD;
          var acc = 0.0;
          for (var r = 0u; r < BR; r++) { acc += tile_s[r * BC + c] * tile_q[r * HDP + d]; }
          dk[n] += acc;
        }
      }
    }
  }
  for (var n = 0u; n < N_K; n++) {
    let e = tid + n * WG;
    if (e < BC * HD && c0 + e / HD < p.s) {
      grad_qk[kbase + c0 * HD + e] = dk[n];
      grad_v[kbase + c0 * HD + e] = dv[n];
    }
  }
}

@compute @workgroup_size(WG)
fn backward_dq(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let b = wid.z;
  let h = wid.y;
  let r0 = wid.x * BR;
  let row0 = (b * p.hq + h) * p.tq;
  let kbase = (b * p.hkv + h / p.group) * p.s_cap * HD;
  let pad = pad_of(b);
  load_q(tid, row0 * HD, r0);
  load_do(tid, row0 * HD, r0);
  load_rows(tid, row0, r0);
  var dq: array<f32, MAX_ACC>;
  let range = key_range(r0, pad);
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    load_kv(tid, kbase, c0);
    workgroupBarrier();
    for (var n = 0u; n < N_S; n++) {
      let e = tid + n * WG;
      if (e < BR * BC) {
        let r = e / BC;
        let c = e % BC;
        let pr = prob(r, c, r0, c0, pad);
        var ds = 0.0;
        if (pr != 0.0) { ds = pr * (dov(r, c) - row_delta[r]); }
        tile_s[e] = ds;
      }
    }
    workgroupBarrier();
    for (var n = 0u; n < N_Q; n++) {
      let e = tid + n * WG;
      if (e < BR * HD) {
        let r = e / HD;
        let d = e % HD;
        var acc = 0.0;
        for (var c = 0u; c < BC; c++) { acc += tile_s[r * BC + c] * tile_k[c * HDP + d]; }
        dq[n] += acc;
      }
    }
  }
  for (var n = 0u; n < N_Q; n++) {
    let e = tid + n * WG;
    if (e < BR * HD && r0 + e / HD < p.tq) { grad_qk[(row0 + r0) * HD + e] = dq[n] * p.scale; }
  }
}

// ---- Uniform windows: the software GPU's path ----
//
// llvmpipe (Mesa's CPU rasteriser, what compatibility mode runs on) executes 8
// invocations as SIMD lanes; a load from a storage or workgroup array assembles its
// vector one lane at a time through the stack (a store-forwarding stall per float,
// 118 ns per 8-lane vec4 load on Mesa 22.3), while a uniform-buffer load is a register
// gather (10 ns). The tiled kernels above read every score operand from workgroup
// memory and run at 0.13 GFLOP/s there. These kernels instead read the operand they
// loop over from 64 KiB uniform-buffer windows, `win` rows of one head each, that the
// launcher copies out: keys and values for forward_uniform and backward_dq_uniform,
// queries, dO and their (lse, delta) for backward_dkv_uniform. Each invocation owns
// one row (a query row; a key row for dK/dV) and keeps it and its accumulators in
// registers: with 2 or 4 rows per invocation the kernels ran slower and took over a
// minute to compile. One dispatch covers one window; the launcher walks them and each
// dispatch folds its window into what the earlier ones left in the outputs: forward
// keeps o normalised and lse exact after every window (so (m, l) restarts as
// (lse, 1)), the gradients add up. B4 Hq4 Hkv2 T400 D64 causal on 2 cores: forward
// 2,610 -> 73 ms, backward 7,890 -> 220 ms.

override HQ4 = HD / 4u;
const UWG: u32 = 32u;
const MAXQ4: u32 = 32u;         // HD / 4 at most
const WIN_V4: u32 = 4096u;

struct WinParams {
  tq: u32,
  s: u32,
  q_offset: u32,
  hq: u32,
  group: u32,
  causal: u32,
  has_pad: u32,
  b: u32,
  hkv_index: u32,   // b * Hkv + kv head
  w0: u32,          // first key (forward, dq) or query row (dkv) of the window
  scale: f32,
  s_cap: u32,       // key rows stored per (batch row, kv head)
  win: u32,         // rows per window (at most 16384 / HD)
}

@group(0) @binding(0) var<uniform> w: WinParams;
// rows_a, rows_b: the operand rows an invocation owns (q and dO, or k and v for dK/dV);
// win_a, win_b: the window it loops over (k and v, or q and dO).
@group(0) @binding(1) var<storage, read> rows_a: array<vec4f>;
@group(0) @binding(2) var<uniform> win_a: array<vec4f, WIN_V4>;
@group(0) @binding(3) var<uniform> win_b: array<vec4f, WIN_V4>;
@group(0) @binding(5) var<storage, read_write> o4: array<vec4f>;
@group(0) @binding(5) var<storage, read> rows_b: array<vec4f>;
// dK/dV: the window rows' lse (floats 0 .. win-1) and delta (win .. 2 win-1).
@group(0) @binding(6) var<uniform> win_stats: array<vec4f, WIN_V4>;
@group(0) @binding(8) var<storage, read_write> dq4: array<vec4f>;
@group(0) @binding(7) var<storage, read_write> dk4: array<vec4f>;
@group(0) @binding(8) var<storage, read_write> dv4: array<vec4f>;

fn win_pad() -> u32 {
  if (w.has_pad == 0u) { return 0u; }
  return u32(max(pad_left[w.b], 0));
}

// The query row a lane of forward_uniform or backward_dq_uniform serves (flat index,
// absolute position, the batch row's padding) and the keys [start, end) of this
// window it sees; none when start >= end.
struct QueryRow { row: u32, pos: u32, pad: u32, start: u32, end: u32 }

fn query_row(lane: u32) -> QueryRow {
  let i = lane % w.tq;
  let h = (w.hkv_index % (w.hq / w.group)) * w.group + lane / w.tq;
  var q: QueryRow;
  q.row = (w.b * w.hq + h) * w.tq + i;
  q.pad = win_pad();
  q.pos = w.q_offset + i;
  q.start = max(w.w0, q.pad);
  q.end = min(w.w0 + w.win, w.s);
  if (w.causal != 0u) { q.end = min(q.end, q.pos + 1u); }
  return q;
}

@compute @workgroup_size(UWG)
fn forward_uniform(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let lane = wid.x * UWG + li;
  if (lane >= w.tq * w.group) { return; }
  let q = query_row(lane);
  let row = q.row;
  if (q.pos < q.pad) {
    // A row inside the padding sees nothing: zeros, written by the first window.
    if (w.w0 == 0u) {
      lse[row] = 0.0;
      for (var d = 0u; d < HQ4; d++) { o4[row * HQ4 + d] = vec4f(0.0); }
    }
    return;
  }
  if (q.start >= q.end) { return; }
  // Keys before this window that the row sees left (o, lse): the running state
  // restarts from m = lse, l = 1, acc = o.
  let before = q.pad < w.w0;
  var m = MASKED;
  var l = 0.0;
  if (before) {
    m = lse[row];
    l = 1.0;
  }
  var qv: array<vec4f, MAXQ4>;
  var acc: array<vec4f, MAXQ4>;
  for (var d = 0u; d < HQ4; d++) {
    qv[d] = rows_a[row * HQ4 + d] * w.scale;
    acc[d] = select(vec4f(0.0), o4[row * HQ4 + d], before);
  }
  for (var j = q.start; j < q.end; j++) {
    let at = (j - w.w0) * HQ4;
    var sc = 0.0;
    for (var d = 0u; d < HQ4; d++) { sc += dot(qv[d], win_a[at + d]); }
    let mn = max(m, sc);
    let alpha = exp(m - mn);
    let pr = exp(sc - mn);
    l = l * alpha + pr;
    m = mn;
    for (var d = 0u; d < HQ4; d++) { acc[d] = acc[d] * alpha + pr * win_b[at + d]; }
  }
  lse[row] = m + log(l);
  for (var d = 0u; d < HQ4; d++) { o4[row * HQ4 + d] = acc[d] / l; }
}

// dq of one query row from the keys of one window, added to dq (cleared beforehand).
@compute @workgroup_size(UWG)
fn backward_dq_uniform(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let lane = wid.x * UWG + li;
  if (lane >= w.tq * w.group) { return; }
  let q = query_row(lane);
  if (q.pos < q.pad || q.start >= q.end) { return; }
  let row = q.row;
  let row_lse = lse_in[row];
  let row_delta = delta_in[row];
  var qv: array<vec4f, MAXQ4>;
  var dov: array<vec4f, MAXQ4>;
  var dq: array<vec4f, MAXQ4>;
  for (var d = 0u; d < HQ4; d++) {
    qv[d] = rows_a[row * HQ4 + d] * w.scale;
    dov[d] = rows_b[row * HQ4 + d];
    dq[d] = vec4f(0.0);
  }
  for (var j = q.start; j < q.end; j++) {
    let at = (j - w.w0) * HQ4;
    var sc = 0.0;
    var dp = 0.0;
    for (var d = 0u; d < HQ4; d++) {
      sc += dot(qv[d], win_a[at + d]);
      dp += dot(dov[d], win_b[at + d]);
    }
    let ds = exp(sc - row_lse) * (dp - row_delta);
    for (var d = 0u; d < HQ4; d++) { dq[d] += ds * win_a[at + d]; }
  }
  for (var d = 0u; d < HQ4; d++) { dq4[row * HQ4 + d] += dq[d] * w.scale; }
}

// dk and dv of one key row from one window of query rows (of one query head of its
// group), added to dk and dv (cleared beforehand).
@compute @workgroup_size(UWG)
fn backward_dkv_uniform(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let j = wid.x * UWG + li;
  if (j >= w.s) { return; }
  let pad = win_pad();
  if (j < pad) { return; }
  // Query rows that see key j: absolute position >= max(j if causal, pad).
  var first = pad;
  if (w.causal != 0u) { first = max(first, j); }
  var start = w.w0;
  if (first > w.q_offset) { start = max(start, first - w.q_offset); }
  let end = min(w.w0 + w.win, w.tq);
  if (start >= end) { return; }
  let row = w.hkv_index * w.s_cap + j;
  var kv: array<vec4f, MAXQ4>;
  var vv: array<vec4f, MAXQ4>;
  var dk: array<vec4f, MAXQ4>;
  var dv: array<vec4f, MAXQ4>;
  for (var d = 0u; d < HQ4; d++) {
    kv[d] = rows_a[row * HQ4 + d];
    vv[d] = rows_b[row * HQ4 + d];
    dk[d] = vec4f(0.0);
    dv[d] = vec4f(0.0);
  }
  for (var i = start; i < end; i++) {
    let r = i - w.w0;
    let at = r * HQ4;
    let row_lse = win_stats[r / 4u][r % 4u];
    let row_delta = win_stats[(w.win + r) / 4u][(w.win + r) % 4u];
    var sc = 0.0;
    var dp = 0.0;
    for (var d = 0u; d < HQ4; d++) {
      sc += dot(win_a[at + d], kv[d]);
      dp += dot(win_b[at + d], vv[d]);
    }
    let pr = exp(sc * w.scale - row_lse);
    let ds = pr * (dp - row_delta);
    for (var d = 0u; d < HQ4; d++) {
      dv[d] += pr * win_b[at + d];
      dk[d] += ds * win_a[at + d];
    }
  }
  for (var d = 0u; d < HQ4; d++) {
    dk4[row * HQ4 + d] += dk[d] * w.scale;
    dv4[row * HQ4 + d] += dv[d];
  }
}

// ---- Register-blocked tiles: real GPUs, head dims that are multiples of 64 ----
//
// The tiled kernels above give each invocation single scores and single outputs, each
// operand read from workgroup memory: two loads per multiply-add. Here 128 invocations
// form 8 row groups (g = tid / 16) of 16 lanes (x = tid % 16), and each owns a block:
// scores of RS = BR / 8 rows (g * RS ..) by CJ = BC / 16 keys (x, x + 16, ..) and
// outputs of 4 rows (g * 4 ..) by KD = HD / 64 vec4 columns (x, x + 16, ..), so one
// vec4 read from workgroup memory feeds 4 to 16 multiply-adds. Rows sit in workgroup
// memory as vec4 with one vec4 of padding (8 lanes reading 8 consecutive rows hit
// distinct banks). P and dS are stored as vec4 of the 4 rows an output block needs:
// key-major for forward_blocked and backward_dq_blocked (BR = 32, so RS = 4 and a
// row group's 4 score rows are its 4 output rows), query-major for
// backward_dkv_blocked, whose outputs are key rows. The row max of each key tile goes
// through workgroup memory; the row sum stays per invocation until the end.
// backward_dkv_blocked runs one workgroup per (BC keys, query head), not per kv head,
// for parallelism: with grouped-query heads it writes per-query-head partials
// [B, Hq, S, HD] that sum_group adds over the group (no float atomics), with one query
// head per kv head it writes dk and dv directly.

const BT: u32 = 128u;
override HD4: u32 = HD / 4u;
override KD: u32 = HD / 64u;
override RS: u32 = BR / 8u;
override CJ: u32 = BC / 16u;
override QS: u32 = HD / 4u + 1u;
// Query-row tensors staged: 1 (q, the forward) or 2 (q, then dO); only the backward
// passes can spare the workgroup memory for dO.
override NQ: u32 = 1u;
const DO_AT: u32 = 1u;
const V_AT: u32 = 1u;

@group(0) @binding(2) var<storage, read> k4: array<vec4f>;
@group(0) @binding(3) var<storage, read> v4: array<vec4f>;
@group(0) @binding(8) var<storage, read_write> out_k4: array<vec4f>;
@group(0) @binding(9) var<storage, read_write> out_v4: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> sum_out: array<vec4f>;

var<workgroup> bq: array<vec4f, NQ * BR * QS>;  // q * scale, then dO
var<workgroup> bkv: array<vec4f, 2u * BC * QS>; // k, then v
var<workgroup> bp: array<vec4f, BR * BC / 4u>;  // P (forward, dkv) or dS (dq)
var<workgroup> bds: array<vec4f, BR * BC / 4u>; // dS (dkv)
var<workgroup> bred: array<f32, BR * 16u>;      // one value per (row, lane)

// Row r, vec4 column c of the staged q (`which` 0) or dO (DO_AT), k (0) or v (V_AT).
fn at_q(which: u32, r: u32, c: u32) -> u32 { return (which * BR + r) * QS + c; }
fn at_k(which: u32, r: u32, c: u32) -> u32 { return (which * BC + r) * QS + c; }

// Rows r0 .. r0 + BR of q (times scale) and, in the backward passes, of dO; rows past
// tq are zero. dO comes in through its own function: it shares binding 5 with the
// forward's output.
fn blk_load_q(tid: u32, base4: u32, r0: u32) {
  for (var e = tid; e < BR * HD4; e += BT) {
    let r = e / HD4;
    var x = vec4f(0.0);
    if (r0 + r < p.tq) { x = rows_a[base4 + r0 * HD4 + e] * p.scale; }
    bq[at_q(0u, r, e % HD4)] = x;
  }
}

fn blk_load_do(tid: u32, base4: u32, r0: u32) {
  for (var e = tid; e < BR * HD4; e += BT) {
    let r = e / HD4;
    var x = vec4f(0.0);
    if (r0 + r < p.tq) { x = rows_b[base4 + r0 * HD4 + e]; }
    bq[at_q(DO_AT, r, e % HD4)] = x;
  }
}

fn blk_load_kv(tid: u32, base4: u32, c0: u32) {
  for (var e = tid; e < BC * HD4; e += BT) {
    let c = e / HD4;
    let d = e % HD4;
    var kx = vec4f(0.0);
    var vx = vec4f(0.0);
    if (c0 + c < p.s) {
      kx = k4[base4 + (c0 + c) * HD4 + d];
      vx = v4[base4 + (c0 + c) * HD4 + d];
    }
    bkv[at_k(0u, c, d)] = kx;
    bkv[at_k(V_AT, c, d)] = vx;
  }
}

// The invocation's score block of staged query rows `qi` (q or dO) against staged key
// rows `ki` (k or v): entry i * CJ + j is row g * RS + i against key x + 16 j.
fn blk_scores(g: u32, x: u32, qi: u32, ki: u32) -> array<f32, 8> {
  var s: array<f32, 8>;
  for (var d = 0u; d < HD4; d++) {
    var a: array<vec4f, 4>;
    var kk: array<vec4f, 2>;
    for (var i = 0u; i < RS; i++) { a[i] = bq[at_q(qi, g * RS + i, d)]; }
    for (var j = 0u; j < CJ; j++) { kk[j] = bkv[at_k(ki, x + 16u * j, d)]; }
    for (var i = 0u; i < RS; i++) {
      for (var j = 0u; j < CJ; j++) { s[i * CJ + j] += dot(a[i], kk[j]); }
    }
  }
  return s;
}

// The score block (RS = 4) into bp key-major: key x + 16 j's vec4 holds rows g * 4 ..
fn blk_put_key_major(g: u32, x: u32, s: array<f32, 8>) {
  for (var j = 0u; j < CJ; j++) {
    bp[(x + 16u * j) * (BR / 4u) + g] = vec4f(s[j], s[CJ + j], s[2u * CJ + j], s[3u * CJ + j]);
  }
}

// acc[i * KD + kd] += sum over keys c of bp[c][row g * 4 + i] * staged row c (k or v,
// `ki`), vec4 column x + 16 kd: P V in the forward, dS K in backward_dq_blocked.
fn blk_accumulate(acc: ptr<function, array<vec4f, 8>>, g: u32, x: u32, ki: u32) {
  for (var c = 0u; c < BC; c++) {
    let w = bp[c * (BR / 4u) + g];
    for (var kd = 0u; kd < KD; kd++) {
      let row = bkv[at_k(ki, c, x + 16u * kd)];
      for (var i = 0u; i < 4u; i++) { (*acc)[i * KD + kd] += w[i] * row; }
    }
  }
}

// The query tile of a forward_blocked or backward_dq_blocked workgroup (x: tile, y:
// query head, z: batch row): its first row, the head's first row, the vec4 offset of
// its kv head's keys, the batch row's padding.
struct QueryTile { r0: u32, row0: u32, kbase4: u32, pad: u32 }

fn query_tile(wid: vec3u) -> QueryTile {
  let b = wid.z;
  let h = wid.y;
  return QueryTile(wid.x * BR, (b * p.hq + h) * p.tq, (b * p.hkv + h / p.group) * p.s_cap * HD4, pad_of(b));
}

@compute @workgroup_size(BT)
fn forward_blocked(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let tile = query_tile(wid);
  let r0 = tile.r0;
  let row0 = tile.row0;
  let pad = tile.pad;
  let g = tid / 16u;
  let x = tid % 16u;
  blk_load_q(tid, row0 * HD4, r0);
  var m: array<f32, 4>;
  var l: array<f32, 4>;
  var acc: array<vec4f, 8>;
  for (var i = 0u; i < 4u; i++) { m[i] = MASKED; }
  let range = key_range(r0, pad);
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    blk_load_kv(tid, tile.kbase4, c0);
    workgroupBarrier();
    var s = blk_scores(g, x, 0u, 0u);
    for (var i = 0u; i < 4u; i++) {
      var mx = MASKED;
      for (var j = 0u; j < CJ; j++) {
        if (!visible(r0 + g * 4u + i, c0 + x + 16u * j, pad)) { s[i * CJ + j] = MASKED; }
        mx = max(mx, s[i * CJ + j]);
      }
      bred[(g * 4u + i) * 16u + x] = mx;
    }
    workgroupBarrier();
    if (tid < BR) {
      var mx = MASKED;
      for (var t = 0u; t < 16u; t++) { mx = max(mx, bred[tid * 16u + t]); }
      row_m[tid] = mx;
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
      let mn = max(m[i], row_m[g * 4u + i]);
      let alpha = exp(m[i] - mn);
      m[i] = mn;
      var sum = 0.0;
      for (var j = 0u; j < CJ; j++) {
        let sc = s[i * CJ + j];
        let pr = select(0.0, exp(sc - mn), sc > MASKED);
        s[i * CJ + j] = pr;
        sum += pr;
      }
      l[i] = l[i] * alpha + sum;
      for (var kd = 0u; kd < KD; kd++) { acc[i * KD + kd] *= alpha; }
    }
    blk_put_key_major(g, x, s);
    workgroupBarrier();
    blk_accumulate(&acc, g, x, V_AT);
  }
  workgroupBarrier();
  for (var i = 0u; i < 4u; i++) { bred[(g * 4u + i) * 16u + x] = l[i]; }
  workgroupBarrier();
  for (var i = 0u; i < 4u; i++) {
    let r = g * 4u + i;
    if (r0 + r >= p.tq) { continue; }
    var total = 0.0;
    for (var t = 0u; t < 16u; t++) { total += bred[r * 16u + t]; }
    for (var kd = 0u; kd < KD; kd++) {
      o4[(row0 + r0 + r) * HD4 + x + 16u * kd] = select(vec4f(0.0), acc[i * KD + kd] / total, total > 0.0);
    }
    if (x == 0u) { lse[row0 + r0 + r] = select(0.0, m[i] + log(total), total > 0.0); }
  }
}

@compute @workgroup_size(BT)
fn backward_dq_blocked(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let tile = query_tile(wid);
  let r0 = tile.r0;
  let row0 = tile.row0;
  let pad = tile.pad;
  let g = tid / 16u;
  let x = tid % 16u;
  blk_load_q(tid, row0 * HD4, r0);
  blk_load_do(tid, row0 * HD4, r0);
  load_rows(tid, row0, r0);
  var dq: array<vec4f, 8>;
  let range = key_range(r0, pad);
  for (var c0 = range.x; c0 < range.y; c0 += BC) {
    workgroupBarrier();
    blk_load_kv(tid, tile.kbase4, c0);
    workgroupBarrier();
    var s = blk_scores(g, x, 0u, 0u);
    let dp = blk_scores(g, x, DO_AT, V_AT);
    for (var i = 0u; i < 4u; i++) {
      let r = g * 4u + i;
      for (var j = 0u; j < CJ; j++) {
        var ds = 0.0;
        if (visible(r0 + r, c0 + x + 16u * j, pad)) {
          ds = exp(s[i * CJ + j] - row_lse[r]) * (dp[i * CJ + j] - row_delta[r]);
        }
        s[i * CJ + j] = ds;
      }
    }
    blk_put_key_major(g, x, s);
    workgroupBarrier();
    blk_accumulate(&dq, g, x, 0u);
  }
  for (var i = 0u; i < 4u; i++) {
    let r = g * 4u + i;
    if (r0 + r >= p.tq) { continue; }
    for (var kd = 0u; kd < KD; kd++) { dq4[(row0 + r0 + r) * HD4 + x + 16u * kd] = dq[i * KD + kd] * p.scale; }
  }
}

@compute @workgroup_size(BT)
fn backward_dkv_blocked(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let b = wid.z;
  let h = wid.y;
  let c0 = wid.x * BC;
  let hk = h / p.group;
  let kbase4 = (b * p.hkv + hk) * p.s_cap * HD4;
  let row0 = (b * p.hq + h) * p.tq;
  let pad = pad_of(b);
  let g = tid / 16u;
  let x = tid % 16u;
  blk_load_kv(tid, kbase4, c0);
  var dk: array<vec4f, 8>;
  var dv: array<vec4f, 8>;
  let rows = query_rows(c0, pad);
  for (var r0 = rows.x; r0 < rows.y; r0 += BR) {
    workgroupBarrier();
    blk_load_q(tid, row0 * HD4, r0);
    blk_load_do(tid, row0 * HD4, r0);
    load_rows(tid, row0, r0);
    workgroupBarrier();
    let s = blk_scores(g, x, 0u, 0u);
    let dp = blk_scores(g, x, DO_AT, V_AT);
    for (var i = 0u; i < RS; i++) {
      let r = g * RS + i;
      for (var j = 0u; j < CJ; j++) {
        let c = x + 16u * j;
        var pr = 0.0;
        if (visible(r0 + r, c0 + c, pad)) { pr = exp(s[i * CJ + j] - row_lse[r]); }
        bp[r * (BC / 4u) + c / 4u][c % 4u] = pr;
        bds[r * (BC / 4u) + c / 4u][c % 4u] = pr * (dp[i * CJ + j] - row_delta[r]);
      }
    }
    workgroupBarrier();
    for (var r = 0u; r < BR; r++) {
      let pr = bp[r * (BC / 4u) + g];
      let ds = bds[r * (BC / 4u) + g];
      for (var kd = 0u; kd < KD; kd++) {
        let dov = bq[at_q(DO_AT, r, x + 16u * kd)];
        let qv = bq[at_q(0u, r, x + 16u * kd)];
        for (var i = 0u; i < 4u; i++) {
          dv[i * KD + kd] += pr[i] * dov;
          dk[i * KD + kd] += ds[i] * qv;
        }
      }
    }
  }
  // One query head per kv head: dk and dv themselves; else this head's partials.
  let out0 = select((b * p.hq + h) * p.s, (b * p.hkv + hk) * p.s_cap, p.group == 1u);
  for (var i = 0u; i < 4u; i++) {
    let key = c0 + g * 4u + i;
    if (key >= p.s) { continue; }
    for (var kd = 0u; kd < KD; kd++) {
      out_k4[(out0 + key) * HD4 + x + 16u * kd] = dk[i * KD + kd];
      out_v4[(out0 + key) * HD4 + x + 16u * kd] = dv[i * KD + kd];
    }
  }
}

// dk (or dv) of each kv head: the sum of its query heads' partials from
// backward_dkv_blocked. One invocation per vec4 of the B * Hkv * S * HD output rows.
@compute @workgroup_size(256)
fn sum_group(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32, @builtin(num_workgroups) nwg: vec3u) {
  let e = (wid.y * nwg.x + wid.x) * 256u + tid;
  if (e >= p.rows) { return; }
  let c = e % HD4;
  let j = (e / HD4) % p.s;
  let bh = e / (HD4 * p.s);
  let first = (bh / p.hkv) * p.hq + (bh % p.hkv) * p.group;
  var acc = vec4f(0.0);
  for (var g = 0u; g < p.group; g++) { acc += rows_a[((first + g) * p.s + j) * HD4 + c]; }
  sum_out[(bh * p.s_cap + j) * HD4 + c] = acc;
}
