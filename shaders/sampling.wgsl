// Next-token sampling from last-position logits, and per-token log-prob + rank for
// prompt scoring, without ever sending a [rows x vocab] array back to the CPU.
//   sample:      per row of logits x [rows, vocab] with its RowParams (temperature T,
//                top_p, top_k, a uniform u drawn on the CPU from the request's seed):
//                  T == 0: the first argmax; log-prob under softmax(x).
//                  T > 0:  z = x / T; keep the top_k largest (all ties of the k-th),
//                          then the smallest set of largest z whose probability,
//                          renormalised over the top-k, reaches top_p (vLLM's rule:
//                          a token stays while the mass strictly above it is < p);
//                          draw by inverse CDF in vocabulary order at u * mass.
//                          The log-prob is of the unfiltered softmax(z) (what vLLM
//                          reports as processed logprobs with top-k/top-p off).
//                With top_n > 0 the row also lists its top_n most likely tokens (largest
//                logit first, ties by smaller id) and their log-probs under the same
//                softmax as the sampled token's (vLLM's top log-probs).
//                out, from out_base: [rows] ids, [rows] log-prob bits, [rows] threshold
//                keys (a token was a candidate iff key(x) >= threshold; tests read the
//                masks off it), then [rows, top_stride] top ids and [rows, top_stride]
//                their log-prob bits (a row fills its first top_n slots).
//   sample_step: one step of a decoding loop that runs many steps between readbacks.
//                Each row's DecodeRow holds its settings and progress; a row that is
//                done is skipped whole (it writes nothing). Otherwise the row samples as
//                `sample` does with u = token_uniform(seed, produced), the counter-based
//                uniform of util/random.ts uniformAt computed bit for bit, so a request's
//                t-th token depends only on its seed and t; writes its results at
//                out_base (a step's slot of the loop's record) and its id into next_ids
//                (the next step's input), counts the token, and marks itself done when
//                the id is one of its stop ids (stops[stop_at ..][..stop_count]) or the
//                count reaches max_tokens. Every row, done or not, also advances its
//                position id (positions[row] += 1): the next step's input, as the
//                cache grows by a token for every row.
//   token_stats: per row of a block of logits [rows, vocab] and its target id
//                (targets[row0 + row]): log-prob under softmax(x * inv_t) and rank
//                (1 + the number of strictly larger logits), into out[row0 + row] and
//                out[total + row0 + row].
// Thresholds are found by radix selection on order-preserving u32 keys of the logits:
// four passes of 8 bits, each building a 256-bin histogram (counts for top-k,
// probability mass in 2^-31 fixed point for top-p) of the rows still matching the
// prefix, then one invocation walks the bins from the top. The draw gives each
// invocation a contiguous slice of the row, scans the slices' masses, and the
// invocation whose interval holds u * mass walks its slice. The top-n list takes n
// selection rounds, each a pass and a tree reduction for the largest key ordered after
// the previous round's pick (n is small: vLLM allows 20 by default).
// Tiling: one 256-wide workgroup per row (grid folded into 2D past 65535 rows).

struct Params {
  rows: u32,
  vocab: u32,
  row0: u32,    // token_stats: the block's first row in targets / out
  total: u32,   // token_stats: rows of the whole output
  inv_t: f32,   // token_stats: 1 / temperature
  top_stride: u32, // sample, sample_step: top-list slots per row (the largest top_n of the rows)
  out_base: u32,   // sample, sample_step: where the results start in `out` (u32s)
  _pad2: u32,
}

struct RowParams {
  temperature: f32,
  top_p: f32,
  top_k: u32,   // 0: off
  u: f32,       // in [0, 1)
  top_n: u32,   // <= top_stride and <= vocab
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

// A decoding row of sample_step: its settings as in RowParams (less u) and its progress.
struct DecodeRow {
  temperature: f32,
  top_p: f32,
  top_k: u32,
  top_n: u32,
  seed_lo: u32,     // the request's seed as two words (util/random.ts words)
  seed_hi: u32,
  produced: u32,    // tokens sampled so far: the counter of the next draw
  max_tokens: u32,
  stop_at: u32,     // the row's stop ids are stops[stop_at .. stop_at + stop_count]
  stop_count: u32,
  done: u32,        // 1 once the row sampled a stop id or its max_tokens-th token
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;
const BINS: u32 = 256u;
// Stands in for -inf: a running max that has seen no element yet.
const NONE: f32 = -3.4028234e38;
const NO_INDEX: u32 = 0xffffffffu;
// Fixed-point scale of top-p masses: a row's total stays below 2^32 after rounding.
const MASS_ONE: f32 = 2147483648.0;

var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_s: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<workgroup> red_k: array<u32, WG>;
var<workgroup> hist: array<atomic<u32>, BINS>;
var<workgroup> sel_prefix: u32;
var<workgroup> sel_above: u32;
var<workgroup> sel_target: u32;
var<workgroup> shared_f: f32;
var<workgroup> shared_log_s: f32;
var<workgroup> pick: atomic<u32>;
var<workgroup> last_cand: atomic<u32>;

// Order-preserving map of f32 to u32: a < b as floats iff key(a) < key(b).
fn key_of(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  if ((b & 0x80000000u) != 0u) { return ~b; }
  return b | 0x80000000u;
}

// Row statistics at inverse temperature inv_t: the max logit, sum exp((x - max) * inv_t)
// and the first index of the max, left in red_m[0], red_s[0], red_i[0].
fn row_stats(base: u32, lid: u32, inv_t: f32) {
  var m = NONE;
  var s = 0.0;
  var arg = NO_INDEX;
  for (var i = lid; i < p.vocab; i += WG) {
    let v = logits[base + i];
    if (arg == NO_INDEX || v > m) {
      s = s * exp((m - v) * inv_t) + 1.0;
      m = v;
      arg = i;
    } else {
      s += exp((v - m) * inv_t);
    }
  }
  red_m[lid] = m;
  red_s[lid] = s;
  red_i[lid] = arg;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k / 2u) {
    if (lid < k) {
      let mb = red_m[lid + k];
      let sb = red_s[lid + k];
      let ib = red_i[lid + k];
      if (ib != NO_INDEX) {
        let ma = red_m[lid];
        let ia = red_i[lid];
        if (ia == NO_INDEX) {
          red_m[lid] = mb;
          red_s[lid] = sb;
          red_i[lid] = ib;
        } else {
          let mm = max(ma, mb);
          red_s[lid] = red_s[lid] * exp((ma - mm) * inv_t) + sb * exp((mb - mm) * inv_t);
          red_m[lid] = mm;
          if (mb > ma || (mb == ma && ib < ia)) { red_i[lid] = ib; }
        }
      }
    }
    workgroupBarrier();
  }
}

// Sum over the row of exp((x - m) * inv_t) for keys >= floor_key (uniform result).
fn candidate_mass(base: u32, lid: u32, m: f32, inv_t: f32, floor_key: u32) -> f32 {
  var s = 0.0;
  for (var i = lid; i < p.vocab; i += WG) {
    let v = logits[base + i];
    if (key_of(v) >= floor_key) { s += exp((v - m) * inv_t); }
  }
  red_s[lid] = s;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k / 2u) {
    if (lid < k) { red_s[lid] += red_s[lid + k]; }
    workgroupBarrier();
  }
  if (lid == 0u) { shared_f = red_s[0]; }
  return workgroupUniformLoad(&shared_f);
}

// The largest key t such that the weight of {keys >= max(t, floor_key)} reaches the
// target: with `weighted` false the weight is a count and the target `want` (top-k);
// with it true the weight is the fixed-point probability renormalised over the
// candidates (scale = MASS_ONE / their mass) and the target frac of the total (top-p).
fn radix_select(base: u32, lid: u32, floor_key: u32, weighted: bool, want: u32, frac: f32, m: f32, inv_t: f32, scale: f32) -> u32 {
  if (lid == 0u) {
    sel_prefix = 0u;
    sel_above = 0u;
    sel_target = want;
  }
  var prefix = 0u;
  for (var level = 0u; level < 4u; level++) {
    let shift = 24u - 8u * level;
    // Bits above this level's digit; none at level 0 (a shift by 32 is not allowed).
    let high = select(0u, 0xffffffffu << ((shift + 8u) % 32u), level > 0u);
    atomicStore(&hist[lid], 0u);
    workgroupBarrier();
    for (var i = lid; i < p.vocab; i += WG) {
      let v = logits[base + i];
      let k = key_of(v);
      if (k >= floor_key && (k & high) == prefix) {
        var w = 1u;
        if (weighted) { w = u32(round(exp((v - m) * inv_t) * scale)); }
        atomicAdd(&hist[(k >> shift) & 0xffu], w);
      }
    }
    workgroupBarrier();
    if (lid == 0u) {
      var goal = sel_target;
      if (level == 0u && weighted) {
        var total = 0u;
        for (var b = 0u; b < BINS; b++) { total += atomicLoad(&hist[b]); }
        goal = clamp(u32(ceil(f32(total) * frac)), 1u, max(total, 1u));
        sel_target = goal;
      }
      var above = sel_above;
      var digit = 0u;
      for (var b = i32(BINS) - 1; b >= 0; b--) {
        let c = atomicLoad(&hist[u32(b)]);
        if (above + c >= goal) {
          digit = u32(b);
          break;
        }
        above += c;
      }
      sel_above = above;
      sel_prefix = prefix | (digit << shift);
    }
    prefix = workgroupUniformLoad(&sel_prefix);
  }
  return prefix;
}

// The row's n largest logits, largest first and ties by smaller index, with their
// log-probs (x - m) * inv_t - log_s, into the top lists of `out`. Round j picks the
// largest (key, -index) ordered after round j - 1's pick.
fn top_list(base: u32, row: u32, lid: u32, n: u32, m: f32, inv_t: f32, log_s: f32) {
  var prev_key = 0u;
  var prev_idx = NO_INDEX;
  let ids_at = p.out_base + 3u * p.rows + row * p.top_stride;
  let lps_at = p.out_base + 3u * p.rows + p.rows * p.top_stride + row * p.top_stride;
  for (var j = 0u; j < n; j++) {
    var best_key = 0u;
    var best_idx = NO_INDEX;
    for (var i = lid; i < p.vocab; i += WG) {
      let k = key_of(logits[base + i]);
      let after = prev_idx == NO_INDEX || k < prev_key || (k == prev_key && i > prev_idx);
      // i grows within an invocation, so among equal keys the first one seen stays.
      if (after && (best_idx == NO_INDEX || k > best_key)) {
        best_key = k;
        best_idx = i;
      }
    }
    red_k[lid] = best_key;
    red_i[lid] = best_idx;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
      if (lid < s) {
        let ob = red_i[lid + s];
        let ok = red_k[lid + s];
        let ib = red_i[lid];
        let ik = red_k[lid];
        if (ob != NO_INDEX && (ib == NO_INDEX || ok > ik || (ok == ik && ob < ib))) {
          red_k[lid] = ok;
          red_i[lid] = ob;
        }
      }
      workgroupBarrier();
    }
    if (lid == 0u) {
      let id = red_i[0];
      out[ids_at + j] = id;
      out[lps_at + j] = bitcast<u32>((logits[base + id] - m) * inv_t - log_s);
      sel_prefix = red_k[0];
      sel_target = id;
    }
    prev_key = workgroupUniformLoad(&sel_prefix);
    prev_idx = workgroupUniformLoad(&sel_target);
  }
}

@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> rowp: array<RowParams>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

// Samples row `row` with settings rp and writes its results from p.out_base. Every
// invocation of the workgroup calls it (barriers); the sampled id is returned to
// invocation 0 only.
fn sample_row(row: u32, lid: u32, rp: RowParams) -> u32 {
  let base = row * p.vocab;
  let greedy = rp.temperature <= 0.0;
  let inv_t = select(1.0 / rp.temperature, 1.0, greedy);
  row_stats(base, lid, inv_t);
  // The statistics leave red_* through uniform loads: later passes reuse red_s.
  if (lid == 0u) {
    shared_f = red_m[0];
    shared_log_s = log(red_s[0]);
    atomicStore(&pick, select(NO_INDEX, red_i[0], greedy));
    atomicStore(&last_cand, 0u);
  }
  let m = workgroupUniformLoad(&shared_f);
  let log_s = workgroupUniformLoad(&shared_log_s);
  var threshold = 0u;
  if (greedy) {
    threshold = key_of(m);
  } else {
    if (rp.top_k > 0u && rp.top_k < p.vocab) {
      threshold = radix_select(base, lid, 0u, false, rp.top_k, 0.0, m, inv_t, 0.0);
    }
    if (rp.top_p < 1.0) {
      let mass = candidate_mass(base, lid, m, inv_t, threshold);
      threshold = max(threshold, radix_select(base, lid, threshold, true, 0u, rp.top_p, m, inv_t, MASS_ONE / mass));
    }
  }

  if (!greedy) {
    let chunk = (p.vocab + WG - 1u) / WG;
    let lo = min(lid * chunk, p.vocab);
    let hi = min(lo + chunk, p.vocab);
    var own = 0.0;
    var last = NO_INDEX;
    for (var i = lo; i < hi; i++) {
      let v = logits[base + i];
      if (key_of(v) >= threshold) {
        own += exp((v - m) * inv_t);
        last = i;
      }
    }
    if (last != NO_INDEX) { atomicMax(&last_cand, last); }
    red_s[lid] = own;
    workgroupBarrier();
    if (lid == 0u) {
      var acc = 0.0;
      for (var j = 0u; j < WG; j++) {
        acc += red_s[j];
        red_s[j] = acc;
      }
    }
    workgroupBarrier();
    let goal = rp.u * red_s[WG - 1u];
    let incl = red_s[lid];
    let excl = select(0.0, red_s[max(lid, 1u) - 1u], lid > 0u);
    if (incl > excl && goal >= excl && goal < incl) {
      var acc = excl;
      var chosen = NO_INDEX;
      for (var i = lo; i < hi; i++) {
        let v = logits[base + i];
        if (key_of(v) >= threshold) {
          acc += exp((v - m) * inv_t);
          chosen = i;
          if (acc > goal) { break; }
        }
      }
      atomicMin(&pick, chosen);
    }
  }
  workgroupBarrier();
  var id = 0u;
  if (lid == 0u) {
    id = atomicLoad(&pick);
    // u * mass rounded up to the whole mass: the last candidate.
    if (id == NO_INDEX) { id = atomicLoad(&last_cand); }
    out[p.out_base + row] = id;
    out[p.out_base + p.rows + row] = bitcast<u32>((logits[base + id] - m) * inv_t - log_s);
    out[p.out_base + 2u * p.rows + row] = threshold;
  }
  if (rp.top_n > 0u) {
    top_list(base, row, lid, min(rp.top_n, min(p.top_stride, p.vocab)), m, inv_t, log_s);
  }
  return id;
}

@compute @workgroup_size(256)
fn sample(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  // Workgroup-uniform exit: every invocation of the group takes the same branch.
  if (row >= p.rows) { return; }
  sample_row(row, lidv.x, rowp[row]);
}

// Chris Wellons' lowbias32, as util/random.ts has it.
fn lowbias32(v: u32) -> u32 {
  var x = v;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

// util/random.ts uniformAt(seed, t) for the seed's words lo, hi: 24 bits, exact in f32.
fn token_uniform(lo: u32, hi: u32, t: u32) -> f32 {
  let h = lowbias32(lowbias32(lowbias32(lo ^ 0x9e3779b9u) ^ hi) + t * 0x85ebca6bu);
  return f32(h >> 8u) * (1.0 / 16777216.0);
}

@group(0) @binding(2) var<storage, read_write> decode_rows: array<DecodeRow>;
@group(0) @binding(4) var<storage, read> stops: array<u32>;
@group(0) @binding(5) var<storage, read_write> next_ids: array<i32>;
@group(0) @binding(6) var<storage, read_write> positions: array<i32>;

// The row's DecodeRow, read once and loaded uniformly: a read_write binding's loads
// are not uniform, and the sampling passes branch on the settings around barriers.
var<workgroup> row_state: DecodeRow;

@compute @workgroup_size(256)
fn sample_step(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) { return; }
  let lid = lidv.x;
  if (lid == 0u) {
    row_state = decode_rows[row];
    positions[row] += 1;
  }
  let st = workgroupUniformLoad(&row_state);
  // A finished row stops here, every invocation alike.
  if (st.done != 0u) { return; }
  let u = token_uniform(st.seed_lo, st.seed_hi, st.produced);
  let id = sample_row(row, lid, RowParams(st.temperature, st.top_p, st.top_k, u, st.top_n, 0u, 0u, 0u));
  if (lid == 0u) {
    next_ids[row] = i32(id);
    let produced = st.produced + 1u;
    var stop = produced >= st.max_tokens;
    for (var s = 0u; s < st.stop_count; s++) {
      if (stops[st.stop_at + s] == id) { stop = true; }
    }
    decode_rows[row].produced = produced;
    decode_rows[row].done = select(0u, 1u, stop);
  }
}

@group(0) @binding(1) var<storage, read> block: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read_write> stats_out: array<u32>;

@compute @workgroup_size(256)
fn token_stats(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lidv: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.rows) { return; }
  let lid = lidv.x;
  let base = row * p.vocab;
  let t = u32(targets[p.row0 + row]);
  let xt = block[base + t];
  var m = NONE;
  var s = 0.0;
  var above = 0u;
  for (var i = lid; i < p.vocab; i += WG) {
    let v = block[base + i];
    if (v > m) {
      s = s * exp((m - v) * p.inv_t) + 1.0;
      m = v;
    } else {
      s += exp((v - m) * p.inv_t);
    }
    if (v > xt) { above++; }
  }
  red_m[lid] = m;
  red_s[lid] = s;
  red_i[lid] = above;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k / 2u) {
    if (lid < k) {
      let ma = red_m[lid];
      let mb = red_m[lid + k];
      let mm = max(ma, mb);
      red_s[lid] = red_s[lid] * exp((ma - mm) * p.inv_t) + red_s[lid + k] * exp((mb - mm) * p.inv_t);
      red_m[lid] = mm;
      red_i[lid] += red_i[lid + k];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    stats_out[p.row0 + row] = bitcast<u32>((xt - red_m[0]) * p.inv_t - log(red_s[0]));
    stats_out[p.total + p.row0 + row] = red_i[0] + 1u;
  }
}
