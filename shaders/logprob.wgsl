// Token log-probs and entropies of softmax(logits / T), one vocabulary chunk at a time,
// so the [tokens x vocab] log-probs never exist whole.
//   stats:        merges one chunk of scaled logits z = x / T ([rows, width], columns
//                 col0 .. col0 + width of the vocabulary) into each row's running
//                 state (M, S, W, zt): M the max so far, S = sum exp(z - M),
//                 W = sum exp(z - M) * (z - M), zt the target's z (NaN until seen).
//                 The last chunk writes logprob = zt - (M + log S) and, with
//                 ENTROPY, entropy = log S - W / S (= lse - E_p[z], kept relative to
//                 M so a peaked distribution does not cancel two large numbers).
//   grad:         dx = (g_lp * (1[j = t] - p_j) - g_ent * p_j * (z_j - E_p[z])) / T from
//                 the final state; grad_inplace overwrites the chunk's logits with it.
// Layout: chunk logits contiguous [rows, width]; state [rows] of vec4f; out and the
// incoming gradient [rows] (log-probs) followed, with ENTROPY, by [rows] (entropies).
// Tiling: stats runs one 256-wide workgroup per row (strided online updates, then a
// tree merge in workgroup memory), stats_rows (the software GPU's) one invocation per
// row; grad one element per invocation, 256 per group.
// Targets outside the vocabulary never match a column, so their log-prob is NaN.

struct Params {
  rows: u32,
  width: u32,
  col0: u32,
  flags: u32,   // 1: first chunk, 2: last chunk, 4: entropy
  inv_t: f32,
  nan_bits: u32,  // 0x7fc00000: a NaN written as a WGSL constant is a compile error
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;
const FIRST: u32 = 1u;
const LAST: u32 = 2u;
const ENTROPY: u32 = 4u;
// Stands in for -inf: logits at or below it (masked vocabulary) carry no probability.
const NONE: f32 = -3.4028234e38;


// (max, sum exp(z - max), sum exp(z - max) * (z - max)); s == 0 means no element yet.
struct Acc { m: f32, s: f32, w: f32 }

fn push(a: Acc, z: f32) -> Acc {
  if (z <= NONE) { return a; }
  if (a.s == 0.0) { return Acc(z, 1.0, 0.0); }
  if (z > a.m) {
    let c = exp(a.m - z);
    return Acc(z, a.s * c + 1.0, c * (a.w + a.s * (a.m - z)));
  }
  let e = exp(z - a.m);
  return Acc(a.m, a.s + e, a.w + e * (z - a.m));
}

fn merge(a: Acc, b: Acc) -> Acc {
  if (b.s == 0.0) { return a; }
  if (a.s == 0.0) { return b; }
  let m = max(a.m, b.m);
  let ca = exp(a.m - m);
  let cb = exp(b.m - m);
  return Acc(m, a.s * ca + b.s * cb, ca * (a.w + a.s * (a.m - m)) + cb * (b.w + b.s * (b.m - m)));
}

fn target_col(t: i32) -> i32 { return t - i32(p.col0); }

var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_s: array<f32, WG>;
var<workgroup> red_w: array<f32, WG>;

@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read_write> state: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn stats(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  // Workgroup-uniform exit: every invocation of the group takes the same branch.
  if (row >= p.rows) { return; }
  let base = row * p.width;
  var a = Acc(NONE, 0.0, 0.0);
  for (var i = lid.x; i < p.width; i += WG) { a = push(a, logits[base + i] * p.inv_t); }
  red_m[lid.x] = a.m;
  red_s[lid.x] = a.s;
  red_w[lid.x] = a.w;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k / 2u) {
    if (lid.x < k) {
      let r = merge(Acc(red_m[lid.x], red_s[lid.x], red_w[lid.x]), Acc(red_m[lid.x + k], red_s[lid.x + k], red_w[lid.x + k]));
      red_m[lid.x] = r.m;
      red_s[lid.x] = r.s;
      red_w[lid.x] = r.w;
    }
    workgroupBarrier();
  }
  if (lid.x != 0u) { return; }
  finish_row(row, base, Acc(red_m[0], red_s[0], red_w[0]));
}

// Merges a row's statistics over this chunk, `part`, into its state and, on the last
// chunk, writes its log-prob (and entropy).
fn finish_row(row: u32, base: u32, part: Acc) {
  var total = part;
  var zt = bitcast<f32>(p.nan_bits);
  if ((p.flags & FIRST) == 0u) {
    let prev = state[row];
    total = merge(Acc(prev.x, prev.y, prev.z), total);
    zt = prev.w;
  }
  let tc = target_col(targets[row]);
  if (tc >= 0 && tc < i32(p.width)) { zt = logits[base + u32(tc)] * p.inv_t; }
  state[row] = vec4f(total.m, total.s, total.w, zt);
  if ((p.flags & LAST) != 0u) {
    let log_s = log(total.s);
    out[row] = zt - (total.m + log_s);
    if ((p.flags & ENTROPY) != 0u) { out[p.rows + row] = log_s - total.w / total.s; }
  }
}

// The software GPU's stats: one invocation per row. llvmpipe runs invocations as SIMD
// lanes and assembles each workgroup-memory load lane by lane through the stack, so
// the tree merge above costs more than the row itself; a lane walking its row alone
// took 1600 rows x 778 columns from 107 ms to 11 ms (2 cores).
@compute @workgroup_size(64)
fn stats_rows(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) nwg: vec3u) {
  let row = (wid.y * nwg.x + wid.x) * 64u + li;
  if (row >= p.rows) { return; }
  let base = row * p.width;
  var a = Acc(NONE, 0.0, 0.0);
  for (var i = 0u; i < p.width; i++) { a = push(a, logits[base + i] * p.inv_t); }
  finish_row(row, base, a);
}

fn dlogit(i: u32, x: f32) -> f32 {
  let row = i / p.width;
  let st = final_state[row];
  let z = x * p.inv_t;
  let prob = exp(z - (st.x + log(st.y)));
  let hit = select(0.0, 1.0, target_col(targets[row]) == i32(i % p.width));
  var d = grad_in[row] * (hit - prob);
  if ((p.flags & ENTROPY) != 0u) {
    let mean_z = st.x + st.z / st.y;
    d -= grad_in[p.rows + row] * prob * (z - mean_z);
  }
  return d * p.inv_t;
}

@group(0) @binding(3) var<storage, read> final_state: array<vec4f>;
@group(0) @binding(4) var<storage, read> grad_in: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn grad(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
  if (i < p.rows * p.width) { dx[i] = dlogit(i, logits[i]); }
}

@group(0) @binding(1) var<storage, read_write> logits_io: array<f32>;

@compute @workgroup_size(256)
fn grad_inplace(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
  if (i < p.rows * p.width) { logits_io[i] = dlogit(i, logits_io[i]); }
}
