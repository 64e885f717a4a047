// One Qwen2 decoder layer of a decode step, whole, for small models: workgroup g takes
// rows [g * ROWS, g * ROWS + ROWS) of the batch and runs each through the layer alone:
//   h = x + o_proj(attention(rope(q), rope(k) appended to the cache, v appended))
//   x' = h + down_proj(silu(gate_proj(rms(h))) * up_proj(rms(h)))
// with q|k|v = rms(x) @ [Wq; Wk; Wv]^T (+ biases). A decode step of a model this small
// is bound by its dispatches, not its arithmetic: the fused layers still take six a
// layer and each costs more than its work (models/qwen_decode.ts). Here a layer is one
// dispatch, and each workgroup streams every weight of the layer once for its rows
// (from L2: the rows' workgroups read the same weights), which is cheap only while the
// layer is small; the launcher takes this path for small layers only.
//
// Layout: x and out [B, H] (each workgroup reads and writes its own rows); w is the
// layer packed into one buffer (models/layer_packs.ts), every segment starting at a
// multiple of 4 floats: the input norm [H], Wq|Wk|Wv [QKV, H], their biases [QKV], Wo
// [H, HQD], the post-attention norm [H], Wg and Wu [INTER, H], Wd
// [H, INTER], at the offsets in Params; caches [B, HKV, cap, HD], this step's keys and
// values written at token `offset`; positions [B] (the rotation's), pad [B] (keys
// before pad[b] are padding). The rows' vectors stay in workgroup memory; products
// give each invocation one output column (a weight row read as vec4s, the rows' inputs
// from workgroup memory); attention takes one head at a time over tiles of 256 keys
// with an online softmax, its value sums split among HD-wide groups of invocations.

// #include "common/cos_sin.wgsl"

override ROWS: u32 = 1u;   // 1..MAX_ROWS
override H: u32 = 64u;     // hidden size
override QKV: u32 = 128u;  // (heads + 2 kv heads) * head dim
override HQD: u32 = 64u;   // heads * head dim
override INTER: u32 = 128u;
const MAX_ROWS = 4u;
const WG = 256u;
const TILE = 256u;

struct Params {
  rows: u32,
  hq: u32,
  hkv: u32,
  hd: u32,
  cap: u32,
  offset: u32,
  eps: f32,
  qkv_bias: u32,
  in_norm: u32,
  wqkv: u32,
  bqkv: u32,
  wo: u32,
  post_norm: u32,
  wg: u32,
  wu: u32,
  wd: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(5) var<storage, read> positions: array<i32>;
@group(0) @binding(6) var<storage, read> pad: array<i32>;
@group(0) @binding(7) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;

var<workgroup> xs: array<f32, ROWS * H>;
var<workgroup> xn: array<f32, ROWS * H>;
var<workgroup> qkv: array<f32, ROWS * QKV>;
var<workgroup> att: array<f32, ROWS * HQD>;
var<workgroup> act: array<f32, ROWS * INTER>;
var<workgroup> red: array<f32, 2u * WG>;
var<private> flip: u32 = 0u;
var<workgroup> scores: array<f32, TILE>;

/** Element i of the packed weights. */
fn wf(i: u32) -> f32 {
  return w[i >> 2u][i & 3u];
}

// Reductions alternate between the two halves of `red`: the software GPU's compiler
// (llvmpipe) moved the read of a total past the barrier after it, so a reduction that
// reused the same half at once overwrote the total before every invocation had it.
fn red_half() -> u32 {
  let base = flip * WG;
  flip ^= 1u;
  return base;
}

fn wg_sum(t: u32, v: f32) -> f32 {
  let base = red_half();
  red[base + t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[base + t] += red[base + t + s]; }
    workgroupBarrier();
  }
  let total = red[base];
  workgroupBarrier();
  return total;
}

fn wg_max(t: u32, v: f32) -> f32 {
  let base = red_half();
  red[base + t] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { red[base + t] = max(red[base + t], red[base + t + s]); }
    workgroupBarrier();
  }
  let m = red[base];
  workgroupBarrier();
  return m;
}

/** xn = rmsNorm(xs) with the norm weight at `at`, every row. */
fn norm_rows(t: u32, at: u32) {
  for (var r = 0u; r < ROWS; r++) {
    var ss = 0.0;
    for (var i = t; i < H; i += WG) {
      let v = xs[r * H + i];
      ss += v * v;
    }
    let inv = inverseSqrt(wg_sum(t, ss) / f32(H) + p.eps);
    for (var i = t; i < H; i += WG) {
      xn[r * H + i] = xs[r * H + i] * inv * wf(at + i);
    }
  }
  workgroupBarrier();
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let t = lid.x;
  let row0 = wid.x * ROWS;
  for (var r = 0u; r < ROWS; r++) {
    let row = row0 + r;
    for (var i = t; i < H; i += WG) {
      xs[r * H + i] = select(0.0, x[min(row, p.rows - 1u) * H + i], row < p.rows);
    }
  }
  workgroupBarrier();

  // q|k|v of the normed rows.
  norm_rows(t, p.in_norm);
  for (var n = t; n < QKV; n += WG) {
    var acc: array<f32, MAX_ROWS>;
    let base = (p.wqkv + n * H) >> 2u;
    for (var k4 = 0u; k4 < H / 4u; k4++) {
      let wv = w[base + k4];
      for (var r = 0u; r < ROWS; r++) {
        let o = r * H + k4 * 4u;
        acc[r] += dot(wv, vec4f(xn[o], xn[o + 1u], xn[o + 2u], xn[o + 3u]));
      }
    }
    let b = select(0.0, wf(p.bqkv + n), p.qkv_bias != 0u);
    for (var r = 0u; r < ROWS; r++) { qkv[r * QKV + n] = acc[r] + b; }
  }
  workgroupBarrier();

  // Rotate the q and k heads (Hugging Face's rotate_half pairs d and d + HD/2).
  let half = p.hd / 2u;
  for (var r = 0u; r < ROWS; r++) {
    let row = row0 + r;
    if (row < p.rows) {
      let pos = f32(positions[row]);
      for (var i = t; i < (p.hq + p.hkv) * half; i += WG) {
        let at = r * QKV + (i / half) * p.hd + i % half;
        let cs = cos_sin(pos * inv_freq[i % half]);
        let a = qkv[at];
        let b = qkv[at + half];
        qkv[at] = a * cs.x - b * cs.y;
        qkv[at + half] = b * cs.x + a * cs.y;
      }
    }
  }
  workgroupBarrier();

  // This step's keys and values into the caches, then read back by this workgroup.
  let kvn = p.hkv * p.hd;
  for (var r = 0u; r < ROWS; r++) {
    let row = row0 + r;
    if (row < p.rows) {
      for (var i = t; i < kvn; i += WG) {
        let c = ((row * p.hkv + i / p.hd) * p.cap + p.offset) * p.hd + i % p.hd;
        k_cache[c] = qkv[r * QKV + HQD + i];
        v_cache[c] = qkv[r * QKV + HQD + kvn + i];
      }
    }
  }
  storageBarrier();
  workgroupBarrier();

  // Attention, one head at a time: keys pad[row]..offset, online softmax over tiles.
  let scale = inverseSqrt(f32(p.hd));
  let group = p.hq / p.hkv;
  let parts = WG / p.hd;
  let part = t / p.hd;
  let dim = t % p.hd;
  let tiles = (p.offset + TILE) / TILE;
  for (var r = 0u; r < ROWS; r++) {
    let row = row0 + r;
    let live = row < p.rows;
    let start = select(0u, u32(pad[min(row, p.rows - 1u)]), live);
    for (var h = 0u; h < p.hq; h++) {
      let kv = (min(row, p.rows - 1u) * p.hkv + h / group) * p.cap;
      var m = -3.0e38;
      var l = 0.0;
      var o = 0.0;
      for (var tile = 0u; tile < tiles; tile++) {
        let j = tile * TILE + t;
        var s = -3.0e38;
        if (live && j >= start && j <= p.offset) {
          var d = 0.0;
          for (var i = 0u; i < p.hd; i++) { d += qkv[r * QKV + h * p.hd + i] * k_cache[(kv + j) * p.hd + i]; }
          s = d * scale;
        }
        let next = max(m, wg_max(t, s));
        let pe = select(0.0, exp(s - next), s > -1.0e38);
        scores[t] = pe;
        let c = exp(m - next);
        l = l * c + wg_sum(t, pe);
        o = o * c;
        if (part < parts && live) {
          for (var jj = part; jj < TILE; jj += parts) {
            let jk = tile * TILE + jj;
            if (jk <= p.offset) { o += scores[jj] * v_cache[(kv + jk) * p.hd + dim]; }
          }
        }
        m = next;
        workgroupBarrier();
      }
      let sums = red_half();
      red[sums + t] = select(0.0, o, part < parts);
      workgroupBarrier();
      if (t < p.hd) {
        var total = 0.0;
        for (var q = 0u; q < parts; q++) { total += red[sums + q * p.hd + t]; }
        att[r * HQD + h * p.hd + t] = select(0.0, total / l, live);
      }
      workgroupBarrier();
    }
  }

  // x += o_proj(att).
  for (var n = t; n < H; n += WG) {
    var acc: array<f32, MAX_ROWS>;
    let base = (p.wo + n * HQD) >> 2u;
    for (var k4 = 0u; k4 < HQD / 4u; k4++) {
      let wv = w[base + k4];
      for (var r = 0u; r < ROWS; r++) {
        let o = r * HQD + k4 * 4u;
        acc[r] += dot(wv, vec4f(att[o], att[o + 1u], att[o + 2u], att[o + 3u]));
      }
    }
    for (var r = 0u; r < ROWS; r++) { xs[r * H + n] += acc[r]; }
  }
  workgroupBarrier();

  // The MLP: act = silu(gate) * up of the normed rows, then x += down_proj(act).
  norm_rows(t, p.post_norm);
  for (var n = t; n < INTER; n += WG) {
    var g: array<f32, MAX_ROWS>;
    var u: array<f32, MAX_ROWS>;
    let gb = (p.wg + n * H) >> 2u;
    let ub = (p.wu + n * H) >> 2u;
    for (var k4 = 0u; k4 < H / 4u; k4++) {
      let wgv = w[gb + k4];
      let wuv = w[ub + k4];
      for (var r = 0u; r < ROWS; r++) {
        let o = r * H + k4 * 4u;
        let v = vec4f(xn[o], xn[o + 1u], xn[o + 2u], xn[o + 3u]);
        g[r] += dot(wgv, v);
        u[r] += dot(wuv, v);
      }
    }
    for (var r = 0u; r < ROWS; r++) { act[r * INTER + n] = g[r] / (1.0 + exp(-g[r])) * u[r]; }
  }
  workgroupBarrier();
  for (var n = t; n < H; n += WG) {
    var acc: array<f32, MAX_ROWS>;
    let base = (p.wd + n * INTER) >> 2u;
    for (var k4 = 0u; k4 < INTER / 4u; k4++) {
      let wv = w[base + k4];
      for (var r = 0u; r < ROWS; r++) {
        let o = r * INTER + k4 * 4u;
        acc[r] += dot(wv, vec4f(act[o], act[o + 1u], act[o + 2u], act[o + 3u]));
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      let row = row0 + r;
      if (row < p.rows) { out[row * H + n] = xs[r * H + n] + acc[r]; }
    }
  }
}
