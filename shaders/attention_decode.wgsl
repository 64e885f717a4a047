// Decode attention: a few query rows (a decode step's) against a whole KV cache.
//   decode:         o = softmax(scale * q k^T + mask) v and lse, for up to 8 query rows a
//                   head, or for one part of each row's keys (then unnormalised, with
//                   the part's max and sum)
//   decode_combine: the parts of decode's rows added into o and lse
// Layout and visibility as shaders/attention.wgsl's forward: q, o [B, Hq, Tq, HD];
// k, v [B, Hkv, S_cap, HD]; lse [B, Hq, Tq]; pad_left [B]; rows without a visible key
// get o = 0, lse = 0. HD is a multiple of 4: q, k and v bind as vec4 arrays.
//
// Tiling: one workgroup serves one query row (x; with parts, row x part) of DGP query
// heads that share a kv head (y: kv head x head block; z: batch row), so each cached
// key and value is read once for the heads of its group. A head has one slot of DT = 32
// invocations. The visible keys [lo, hi) go by in chunks of DCH: a chunk's keys and
// values are loaded into registers (NPF vec4s of each an invocation) one chunk ahead,
// so their global latency overlaps the chunk before, and are staged in workgroup memory
// with rows padded by one vec4 (key rows read across a slot's lanes then fall in
// distinct banks). Lane l of a slot scores keys l, l + 32, ... of the chunk against its
// head's pre-scaled query, as vec4 products; each slot's max and sum of exp come from
// its 32 lanes' partials in workgroup memory, read by every lane of the slot (online
// softmax across chunks, four barriers a chunk). For P V the slot's lanes split the
// head's HD / 4 vec4 columns and, where 32 lanes outnumber them, the keys into KS
// subsets, added together at the end.

override HD: u32 = 64u;
override DGP: u32 = 8u;          // query heads a workgroup, a slot each
override DCH: u32 = 64u;         // keys a chunk
const DT: u32 = 32u;             // invocations a slot
override DWG: u32 = DT * DGP;
override HD4: u32 = HD / 4u;
override KP4: u32 = HD4 + 1u;    // vec4s from one staged key or value row to the next
override NPF: u32 = (DCH * HD4 + DWG - 1u) / DWG;     // vec4s of k (and of v) a lane carries a chunk
override KS: u32 = max(1u, DT / HD4);                 // key subsets of a slot's P V
override NACC: u32 = (HD4 + DT - 1u) / DT;            // vec4 accumulators a lane
const MAX_PF: u32 = 8u;
const MAX_ACC: u32 = 2u;
// A workgroup's query rows and keys a chunk, by the names common/attention_mask.wgsl reads.
override BR: u32 = 1u;
override BC: u32 = DCH;

// #include "common/attention_mask.wgsl"

@group(0) @binding(1) var<storage, read> q4: array<vec4f>;
@group(0) @binding(2) var<storage, read> k4: array<vec4f>;
@group(0) @binding(3) var<storage, read> v4: array<vec4f>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

var<workgroup> dec_q: array<vec4f, DGP * HD4>;
// The chunk's keys, then its values; at the end the key subsets' partial outputs.
var<workgroup> dec_kv: array<vec4f, DCH * KP4>;
var<workgroup> dec_s: array<f32, DGP * DCH>;
// Each lane's partial max (first DWG) and sum of exp (next DWG) of a chunk.
var<workgroup> dec_red: array<f32, 2u * DWG>;

alias Carry = array<vec4f, MAX_PF>;

// The chunk of n keys (or values) from key c0 on, the lane's share of its vec4s.
fn fetch(values: bool, base4: u32, c0: u32, n: u32, tid: u32) -> Carry {
  var r: Carry;
  for (var a = 0u; a < NPF; a++) {
    let e = tid + a * DWG;
    if (e < n * HD4) {
      let g = base4 + c0 * HD4 + e;
      if (values) { r[a] = v4[g]; } else { r[a] = k4[g]; }
    }
  }
  return r;
}

fn stage(r: Carry, n: u32, tid: u32) {
  for (var a = 0u; a < NPF; a++) {
    let e = tid + a * DWG;
    if (e < n * HD4) { dec_kv[(e / HD4) * KP4 + e % HD4] = r[a]; }
  }
}

@compute @workgroup_size(DWG)
fn decode(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) tid: u32) {
  let b = wid.z;
  let blocks = (p.group + DGP - 1u) / DGP;
  let hk = wid.y / blocks;
  let h0 = hk * p.group + (wid.y % blocks) * DGP;    // first query head of this workgroup
  let heads = min(DGP, hk * p.group + p.group - h0);
  let i = wid.x / p.splits;
  let part = wid.x % p.splits;
  let kbase4 = (b * p.hkv + hk) * p.s_cap * HD4;
  let pad = pad_of(b);
  let pos = p.q_offset + i;
  var lo = min(pad, p.s);
  var hi = p.s;
  if (p.causal != 0u) { hi = min(hi, pos + 1u); }
  if (pos < pad) { hi = lo; }
  if (p.splits > 1u) {
    let first = lo + part * p.split_keys;
    lo = min(first, hi);
    hi = min(first + p.split_keys, hi);
  }
  for (var e = tid; e < DGP * HD4; e += DWG) {
    let h = e / HD4;
    var x = vec4f(0.0);
    if (h < heads) { x = q4[((b * p.hq + h0 + h) * p.tq + i) * HD4 + e % HD4] * p.scale; }
    dec_q[e] = x;
  }
  let slot = tid / DT;
  let lane = tid % DT;
  var m = MASKED;
  var l = 0.0;
  var acc: array<vec4f, MAX_ACC>;
  var kr = fetch(false, kbase4, lo, min(DCH, hi - lo), tid);
  var vr = fetch(true, kbase4, lo, min(DCH, hi - lo), tid);
  for (var c0 = lo; c0 < hi; c0 += DCH) {
    let n = min(DCH, hi - c0);
    let next = c0 + DCH;
    let n_next = select(0u, min(DCH, hi - next), next < hi);
    workgroupBarrier();
    stage(kr, n, tid);
    kr = fetch(false, kbase4, next, n_next, tid);
    workgroupBarrier();
    var part_max = MASKED;
    for (var j = lane; j < DCH; j += DT) {
      var sc = MASKED;
      if (j < n) {
        var s4 = vec4f(0.0);
        for (var d = 0u; d < HD4; d++) { s4 += dec_q[slot * HD4 + d] * dec_kv[j * KP4 + d]; }
        sc = s4.x + s4.y + s4.z + s4.w;
        part_max = max(part_max, sc);
      }
      dec_s[slot * DCH + j] = sc;
    }
    dec_red[tid] = part_max;
    workgroupBarrier();
    // Every score is taken: the keys' rows are free for the values.
    stage(vr, n, tid);
    vr = fetch(true, kbase4, next, n_next, tid);
    var m_new = m;
    for (var t = 0u; t < DT; t++) { m_new = max(m_new, dec_red[slot * DT + t]); }
    var part_sum = 0.0;
    for (var j = lane; j < DCH; j += DT) {
      let pr = select(0.0, exp(dec_s[slot * DCH + j] - m_new), j < n);
      dec_s[slot * DCH + j] = pr;
      part_sum += pr;
    }
    dec_red[DWG + tid] = part_sum;
    let alpha = exp(m - m_new);
    m = m_new;
    workgroupBarrier();
    var total = 0.0;
    for (var t = 0u; t < DT; t++) { total += dec_red[DWG + slot * DT + t]; }
    l = l * alpha + total;
    for (var a = 0u; a < NACC; a++) {
      let e = lane + a * DT;
      if (e < KS * HD4) {
        let d4 = e % HD4;
        var pv = vec4f(0.0);
        for (var j = e / HD4; j < n; j += KS) { pv += dec_s[slot * DCH + j] * dec_kv[j * KP4 + d4]; }
        acc[a] = acc[a] * alpha + pv;
      }
    }
  }
  if (KS > 1u) {
    // Lane ks * HD4 + d4 holds key subset ks of column d4 (NACC is 1 here).
    workgroupBarrier();
    dec_kv[tid] = acc[0];
    workgroupBarrier();
    if (lane < HD4) {
      for (var s = 1u; s < KS; s++) { acc[0] += dec_kv[tid + s * HD4]; }
    }
  }
  if (slot < heads) {
    let row = (b * p.hq + h0 + slot) * p.tq + i;
    for (var a = 0u; a < NACC; a++) {
      let d4 = lane + a * DT;
      if (d4 < HD4) {
        var out = acc[a];
        var at = row * HD + 4u * d4;
        if (p.splits > 1u) {
          at = (row * p.splits + part) * HD + 4u * d4;
        } else {
          out = select(vec4f(0.0), out / l, l > 0.0);
        }
        o[at] = out.x;
        o[at + 1u] = out.y;
        o[at + 2u] = out.z;
        o[at + 3u] = out.w;
      }
    }
    if (lane == 0u) {
      if (p.splits > 1u) {
        lse[2u * (row * p.splits + part)] = m;
        lse[2u * (row * p.splits + part) + 1u] = l;
      } else {
        lse[row] = select(0.0, m + log(l), l > 0.0);
      }
    }
  }
}

// The parts of decode's rows, [row, part, HD] outputs relative to each part's max and
// [row, part, 2] (max, sum), added up: one workgroup per row.
@group(0) @binding(2) var<storage, read> part_o: array<f32>;
@group(0) @binding(3) var<storage, read> part_ml: array<f32>;

const CWG = 64u;

@compute @workgroup_size(CWG)
fn decode_combine(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) tid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) { return; }
  let first = row * p.splits;
  var mx = MASKED;
  for (var s = 0u; s < p.splits; s++) {
    if (part_ml[2u * (first + s) + 1u] > 0.0) { mx = max(mx, part_ml[2u * (first + s)]); }
  }
  var total = 0.0;
  for (var s = 0u; s < p.splits; s++) {
    let ls = part_ml[2u * (first + s) + 1u];
    if (ls > 0.0) { total += ls * exp(part_ml[2u * (first + s)] - mx); }
  }
  for (var d = tid; d < HD; d += CWG) {
    var acc = 0.0;
    for (var s = 0u; s < p.splits; s++) {
      if (part_ml[2u * (first + s) + 1u] > 0.0) { acc += part_o[(first + s) * HD + d] * exp(part_ml[2u * (first + s)] - mx); }
    }
    o[row * HD + d] = select(0.0, acc / total, total > 0.0);
  }
  if (tid == 0u) { lse[row] = select(0.0, mx + log(total), total > 0.0); }
}
