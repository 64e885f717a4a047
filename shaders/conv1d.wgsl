// Causal depthwise conv1d over time (Qwen3.5's short convolution before the delta rule),
// with an optional fused SiLU:
//   y[b, t, c] = act(sum_j w[c, j] * xe[b, t - (K-1) + j, c])
// xe is x with left-padding positions (offset + t < pad_left[b]) read as zero, and
// times before the first new token read from the conv state [B, K-1, C] (the last K-1
// inputs of the tokens already processed; zeros for a fresh sequence).
//   forward       y, one element per invocation
//   state_update  state <- the last K-1 inputs of (state, x), in place, one (b, c) per invocation
//   backward_dpre dpre = dy * act'(pre), one element per invocation
//   backward_dx   dx[b, t, c] = sum_j w[c, j] dpre[b, t + K-1 - j, c] (zero on padding)
//   backward_dw   per block of ROWS rows of [B*T]: partial[blk, c, j] = sum dpre * xe,
//                 one (block, c) per invocation; the launcher sums the blocks.
// Layout: x, y, dy, dx [B, T, C] contiguous (channels last, as the projection writes
// them); w [C, K]; pad_left [B] i32. 256 invocations per workgroup, grid folded into 2D.

override SILU: u32 = 1u;

const ROWS: u32 = 64u;

struct Params {
  n: u32,        // elements of the grid
  b: u32,
  t: u32,
  c: u32,
  k: u32,
  offset: u32,   // absolute position of the first new token
  has_pad: u32,
  has_state: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

fn index(wid: vec3u, lid: vec3u, nwg: vec3u) -> u32 { return (wid.y * nwg.x + wid.x) * 256u + lid.x; }

fn sigmoid(a: f32) -> f32 { return 1.0 / (1.0 + exp(-a)); }

fn act(a: f32) -> f32 {
  if (SILU == 1u) { return a * sigmoid(a); }
  return a;
}

fn act_grad(a: f32) -> f32 {
  if (SILU == 1u) {
    let s = sigmoid(a);
    return s * (1.0 + a * (1.0 - s));
  }
  return 1.0;
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> state: array<f32>;
@group(0) @binding(4) var<storage, read> pad_left: array<i32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

fn padded(b: u32, s: i32) -> bool {
  return p.has_pad == 1u && i32(p.offset) + s < pad_left[b];
}

// Input at time s (may be negative: then from the state) of row b, channel c.
fn input_at(b: u32, s: i32, c: u32) -> f32 {
  if (s < 0) {
    if (p.has_state == 0u) { return 0.0; }
    return state[(b * (p.k - 1u) + u32(i32(p.k) - 1 + s)) * p.c + c];
  }
  if (padded(b, s)) { return 0.0; }
  return x[(b * p.t + u32(s)) * p.c + c];
}

fn pre_activation(b: u32, t: u32, c: u32) -> f32 {
  var acc = 0.0;
  for (var j = 0u; j < p.k; j++) {
    acc += w[c * p.k + j] * input_at(b, i32(t + j) - i32(p.k - 1u), c);
  }
  return acc;
}

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.c;
  let row = i / p.c;
  y[i] = act(pre_activation(row / p.t, row % p.t, c));
}

@group(0) @binding(1) var<storage, read> su_x: array<f32>;
@group(0) @binding(2) var<storage, read> su_pad: array<i32>;
@group(0) @binding(3) var<storage, read_write> su_state: array<f32>;

// Ascending j reads slot j + T >= j before anything writes it, so in place is safe.
@compute @workgroup_size(256)
fn state_update(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.c;
  let b = i / p.c;
  let km1 = p.k - 1u;
  for (var j = 0u; j < km1; j++) {
    let s = i32(p.t + j) - i32(km1);
    var v = 0.0;
    if (s < 0) {
      v = su_state[(b * km1 + j + p.t) * p.c + c];
    } else if (!(p.has_pad == 1u && i32(p.offset) + s < su_pad[b])) {
      v = su_x[(b * p.t + u32(s)) * p.c + c];
    }
    su_state[(b * km1 + j) * p.c + c] = v;
  }
}

@group(0) @binding(3) var<storage, read> bp_pad: array<i32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dpre: array<f32>;

fn bp_input(b: u32, s: i32, c: u32) -> f32 {
  if (s < 0 || (p.has_pad == 1u && i32(p.offset) + s < bp_pad[b])) { return 0.0; }
  return x[(b * p.t + u32(s)) * p.c + c];
}

@compute @workgroup_size(256)
fn backward_dpre(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.c;
  let row = i / p.c;
  let b = row / p.t;
  let t = row % p.t;
  var a = 0.0;
  for (var j = 0u; j < p.k; j++) {
    a += w[c * p.k + j] * bp_input(b, i32(t + j) - i32(p.k - 1u), c);
  }
  dpre[i] = dy[i] * act_grad(a);
}

@group(0) @binding(1) var<storage, read> dx_w: array<f32>;
@group(0) @binding(2) var<storage, read> dx_pad: array<i32>;
@group(0) @binding(3) var<storage, read> dx_dpre: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn backward_dx(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.c;
  let row = i / p.c;
  let b = row / p.t;
  let t = row % p.t;
  if (p.has_pad == 1u && i32(p.offset + t) < dx_pad[b]) {
    dx[i] = 0.0;
    return;
  }
  var acc = 0.0;
  for (var j = 0u; j < p.k; j++) {
    let out = t + p.k - 1u - j;
    if (out < p.t) { acc += dx_w[c * p.k + j] * dx_dpre[(b * p.t + out) * p.c + c]; }
  }
  dx[i] = acc;
}

@group(0) @binding(2) var<storage, read> dw_pad: array<i32>;
@group(0) @binding(3) var<storage, read> dw_dpre: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;

@compute @workgroup_size(256)
fn backward_dw(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.c;
  let blk = i / p.c;
  let rows = p.b * p.t;
  let end = min((blk + 1u) * ROWS, rows);
  for (var j = 0u; j < p.k; j++) {
    var acc = 0.0;
    for (var r = blk * ROWS; r < end; r++) {
      let b = r / p.t;
      let s = i32(r % p.t + j) - i32(p.k - 1u);
      if (s < 0 || (p.has_pad == 1u && i32(p.offset) + s < dw_pad[b])) { continue; }
      acc += dw_dpre[r * p.c + c] * x[(b * p.t + u32(s)) * p.c + c];
    }
    partial[(blk * p.c + c) * p.k + j] = acc;
  }
}
