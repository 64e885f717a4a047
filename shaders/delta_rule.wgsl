// Gated delta rule (Gated DeltaNet), forward. Per batch row b and value head h (its
// key head h / group) with a state S [Dk, Dv]:
//   S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T (scale q_t)
// Layouts: q, k [B, T, Hk, Dk]; v, out [B, T, Hv, Dv]; g, beta [B, T, Hv];
// state [B, Hv, Dk, Dv]. Rows with offset + t < pad_left[b] are padding: they leave
// the state alone and output zeros.
//
// Chunked form (flash-linear-attention's WY representation), time cut into chunks of
// CS rows, padded time Tp = NC * CS; per (b, h) and chunk, with gamma_r the cumulative
// log-decay inside the chunk and the chunk-start state S_c:
//   A = strictly-lower(beta_r (k_r . k_s) e^(gamma_r - gamma_s)),  T = (I + A)^-1
//   W = T diag(beta e^gamma) K,  U = T diag(beta) V
//   Vn = U - W S_c
//   O = diag(e^gamma) scale Q S_c + P Vn,  P = lower(scale (q_r . k_s) e^(gamma_r - gamma_s))
//   S_(c+1) = e^(gamma_last) S_c + (diag(e^(gamma_last - gamma)) K)^T Vn
// Entry points, in launch order:
//   gates     gb[bh, tp] = (gamma, beta, valid, 0); one (bh, chunk) per invocation
//   pairs     P and KK = strictly-lower((k_r . k_s) e^(..)) [bh, Tp, CS]; one entry each
//   tinv      T by forward substitution in workgroup memory; one (bh, chunk) per workgroup
//   wu        W [bh, Tp, Dk] and U [bh, Tp, Dv]; one entry per invocation
//   states    the sequential scan: H [bh, NC, Dk, Dv] (each chunk's start state), Vn,
//             and the final state; one (bh, block of BV value columns) per workgroup,
//             its state block in workgroup memory
//   output    O; one output element per invocation
//   recurrent the token-by-token recurrence straight on the state buffer (decoding);
//             one (bh, value column) per invocation
// bh = b * Hv + h. Element-wise entry points run 256 invocations per workgroup over a
// grid folded into 2D.

// #include "common/delta_rule.wgsl"

@group(0) @binding(1) var<storage, read> gt_pad: array<i32>;
@group(0) @binding(2) var<storage, read> gt_g: array<f32>;
@group(0) @binding(3) var<storage, read> gt_beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> gt_out: array<vec4f>;

@compute @workgroup_size(256)
fn gates(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let bh = i / p.nc;
  let c = i % p.nc;
  let b = bh / p.hv;
  let h = bh % p.hv;
  var gamma = 0.0;
  for (var r = 0u; r < p.cs; r++) {
    let t = c * p.cs + r;
    let ok = t < p.t && (p.has_pad == 0u || i32(p.offset + t) >= gt_pad[b]);
    var beta = 0.0;
    if (ok) {
      gamma += gt_g[(b * p.t + t) * p.hv + h];
      beta = gt_beta[(b * p.t + t) * p.hv + h];
    }
    gt_out[bh * tp_len() + t] = vec4f(gamma, beta, select(0.0, 1.0, ok), 0.0);
  }
}

@group(0) @binding(2) var<storage, read> pr_q: array<f32>;
@group(0) @binding(3) var<storage, read> pr_k: array<f32>;
@group(0) @binding(4) var<storage, read_write> pr_p: array<f32>;
@group(0) @binding(5) var<storage, read_write> pr_kk: array<f32>;

@compute @workgroup_size(256)
fn pairs(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let s = i % p.cs;
  let row = i / p.cs;
  let tp = row % tp_len();
  let bh = row / tp_len();
  let c = tp / p.cs;
  let r = tp % p.cs;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let sp = c * p.cs + s;
  var pv = 0.0;
  var kk = 0.0;
  let gr = gb[bh * tp_len() + tp];
  let gs = gb[bh * tp_len() + sp];
  if (s <= r && gr.z > 0.0 && gs.z > 0.0) {
    let e = exp(gr.x - gs.x);
    let ro = qk_at(b, tp, h);
    let so = qk_at(b, sp, h);
    var dq = 0.0;
    var dk = 0.0;
    for (var d = 0u; d < p.dk; d++) {
      let ks = pr_k[so + d];
      dq += pr_q[ro + d] * ks;
      dk += pr_k[ro + d] * ks;
    }
    pv = p.scale * dq * e;
    if (s < r) { kk = dk * e; }
  }
  pr_p[i] = pv;
  pr_kk[i] = kk;
}

@group(0) @binding(2) var<storage, read> ti_kk: array<f32>;
@group(0) @binding(3) var<storage, read_write> ti_out: array<f32>;

var<workgroup> tm: array<f32, CHUNK * CHUNK>;
var<workgroup> trow: array<f32, CHUNK>;

// Row i of T = (I + A)^-1: T[i, m] = -(A[i, m] + sum_{m < j < i} A[i, j] T[j, m]);
// invocation m owns column m, row i is staged so it can be overwritten in place.
@compute @workgroup_size(CHUNK)
fn tinv(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = flat_group(wid, nwg);
  let bh = g / p.nc;
  let c = g % p.nc;
  let m = lid.x;
  let cs = p.cs;
  let base = (bh * tp_len() + c * cs) * cs;
  for (var r = 0u; r < cs; r++) {
    var a = 0.0;
    if (m < r) { a = gb[bh * tp_len() + c * cs + r].y * ti_kk[base + r * cs + m]; }
    tm[r * cs + m] = a;
  }
  workgroupBarrier();
  for (var i = 1u; i < cs; i++) {
    if (m < i) { trow[m] = tm[i * cs + m]; }
    workgroupBarrier();
    if (m < i) {
      var acc = trow[m];
      for (var j = m + 1u; j < i; j++) { acc += trow[j] * tm[j * cs + m]; }
      tm[i * cs + m] = -acc;
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < cs; r++) {
    var v = 0.0;
    if (m == r) { v = 1.0; } else if (m < r) { v = tm[r * cs + m]; }
    ti_out[base + r * cs + m] = v;
  }
}

@group(0) @binding(2) var<storage, read> wu_k: array<f32>;
@group(0) @binding(3) var<storage, read> wu_v: array<f32>;
@group(0) @binding(4) var<storage, read> wu_t: array<f32>;
@group(0) @binding(5) var<storage, read_write> wu_w: array<f32>;
@group(0) @binding(6) var<storage, read_write> wu_u: array<f32>;

@compute @workgroup_size(256)
fn wu(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let width = p.dk + p.dv;
  let col = i % width;
  let row = i / width;
  let tp = row % tp_len();
  let bh = row / tp_len();
  let c = tp / p.cs;
  let r = tp % p.cs;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let start = bh * tp_len() + c * p.cs;
  var acc = 0.0;
  for (var s = 0u; s <= r; s++) {
    let gs = gb[start + s];
    if (gs.z == 0.0) { continue; }
    let tv = wu_t[(bh * tp_len() + tp) * p.cs + s] * gs.y;
    if (col < p.dk) {
      acc += tv * exp(gs.x) * wu_k[qk_at(b, c * p.cs + s, h) + col];
    } else {
      acc += tv * wu_v[v_at(b, c * p.cs + s, h) + col - p.dk];
    }
  }
  if (col < p.dk) {
    wu_w[row * p.dk + col] = acc;
  } else {
    wu_u[row * p.dv + col - p.dk] = acc;
  }
}

@group(0) @binding(2) var<storage, read> st_k: array<f32>;
@group(0) @binding(3) var<storage, read> st_w: array<f32>;
@group(0) @binding(4) var<storage, read> st_u: array<f32>;
@group(0) @binding(5) var<storage, read_write> st_state: array<f32>;
@group(0) @binding(6) var<storage, read_write> st_h: array<f32>;
@group(0) @binding(7) var<storage, read_write> st_vn: array<f32>;

var<workgroup> sblk: array<f32, KMAX * BV>;
var<workgroup> vnblk: array<f32, CHUNK * BV>;

@compute @workgroup_size(256)
fn states(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = flat_group(wid, nwg);
  let bh = g / p.nvb;
  let j0 = (g % p.nvb) * BV;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let cs = p.cs;
  let tl = tp_len();
  for (var e = lid.x; e < p.dk * BV; e += WG) {
    let j = j0 + e % BV;
    var v = 0.0;
    if (p.has_state == 1u && j < p.dv) { v = st_state[(bh * p.dk + e / BV) * p.dv + j]; }
    sblk[e] = v;
  }
  workgroupBarrier();
  for (var c = 0u; c < p.nc; c++) {
    for (var e = lid.x; e < p.dk * BV; e += WG) {
      let j = j0 + e % BV;
      if (j < p.dv) { st_h[((bh * p.nc + c) * p.dk + e / BV) * p.dv + j] = sblk[e]; }
    }
    for (var e = lid.x; e < cs * BV; e += WG) {
      let jj = e % BV;
      let j = j0 + jj;
      let row = bh * tl + c * cs + e / BV;
      var acc = 0.0;
      if (j < p.dv) {
        acc = st_u[row * p.dv + j];
        for (var d = 0u; d < p.dk; d++) { acc -= st_w[row * p.dk + d] * sblk[d * BV + jj]; }
        st_vn[row * p.dv + j] = acc;
      }
      vnblk[e] = acc;
    }
    workgroupBarrier();
    let glast = gb[bh * tl + c * cs + cs - 1u].x;
    let el = exp(glast);
    for (var e = lid.x; e < p.dk * BV; e += WG) {
      let d = e / BV;
      let jj = e % BV;
      var acc = el * sblk[e];
      for (var r = 0u; r < cs; r++) {
        let gr = gb[bh * tl + c * cs + r];
        if (gr.z == 0.0) { continue; }
        acc += exp(glast - gr.x) * st_k[qk_at(b, c * cs + r, h) + d] * vnblk[r * BV + jj];
      }
      sblk[e] = acc;
    }
    workgroupBarrier();
  }
  if (p.has_state == 1u) {
    for (var e = lid.x; e < p.dk * BV; e += WG) {
      let j = j0 + e % BV;
      if (j < p.dv) { st_state[(bh * p.dk + e / BV) * p.dv + j] = sblk[e]; }
    }
  }
}

@group(0) @binding(2) var<storage, read> ou_q: array<f32>;
@group(0) @binding(3) var<storage, read> ou_p: array<f32>;
@group(0) @binding(4) var<storage, read> ou_h: array<f32>;
@group(0) @binding(5) var<storage, read> ou_vn: array<f32>;
@group(0) @binding(6) var<storage, read_write> ou_out: array<f32>;

@compute @workgroup_size(256)
fn output(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let j = i % p.dv;
  let rest = i / p.dv;
  let h = rest % p.hv;
  let bt = rest / p.hv;
  let t = bt % p.t;
  let b = bt / p.t;
  let bh = b * p.hv + h;
  let c = t / p.cs;
  let r = t % p.cs;
  let gr = gb[bh * tp_len() + t];
  if (gr.z == 0.0) {
    ou_out[i] = 0.0;
    return;
  }
  let qo = qk_at(b, t, h);
  let hb = (bh * p.nc + c) * p.dk;
  var inter = 0.0;
  for (var d = 0u; d < p.dk; d++) { inter += ou_q[qo + d] * ou_h[(hb + d) * p.dv + j]; }
  var acc = inter * p.scale * exp(gr.x);
  let start = bh * tp_len() + c * p.cs;
  for (var s = 0u; s <= r; s++) { acc += ou_p[(bh * tp_len() + t) * p.cs + s] * ou_vn[(start + s) * p.dv + j]; }
  ou_out[i] = acc;
}

@group(0) @binding(1) var<storage, read> rc_pad: array<i32>;
@group(0) @binding(2) var<storage, read> rc_q: array<f32>;
@group(0) @binding(3) var<storage, read> rc_k: array<f32>;
@group(0) @binding(4) var<storage, read> rc_v: array<f32>;
@group(0) @binding(5) var<storage, read> rc_g: array<f32>;
@group(0) @binding(6) var<storage, read> rc_beta: array<f32>;
@group(0) @binding(7) var<storage, read_write> rc_state: array<f32>;
@group(0) @binding(8) var<storage, read_write> rc_out: array<f32>;

// Each invocation owns one column of one state, so it updates it in place unshared.
@compute @workgroup_size(256)
fn recurrent(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let j = i % p.dv;
  let bh = i / p.dv;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let so = bh * p.dk * p.dv + j;
  for (var t = 0u; t < p.t; t++) {
    let vo = v_at(b, t, h) + j;
    if (p.has_pad == 1u && i32(p.offset + t) < rc_pad[b]) {
      rc_out[vo] = 0.0;
      continue;
    }
    let gi = (b * p.t + t) * p.hv + h;
    let decay = exp(rc_g[gi]);
    let qo = qk_at(b, t, h);
    var kv = 0.0;
    for (var d = 0u; d < p.dk; d++) {
      let s = rc_state[so + d * p.dv] * decay;
      rc_state[so + d * p.dv] = s;
      kv += s * rc_k[qo + d];
    }
    let delta = rc_beta[gi] * (rc_v[vo] - kv);
    var o = 0.0;
    for (var d = 0u; d < p.dk; d++) {
      let s = rc_state[so + d * p.dv] + rc_k[qo + d] * delta;
      rc_state[so + d * p.dv] = s;
      o += s * rc_q[qo + d];
    }
    rc_out[vo] = o * p.scale;
  }
}

// Gated DeltaNet's log-decay from its projection a [rows, H] (H = p.hv, n = rows * H):
//   decay_gate       g = -exp(a_log[h]) softplus(a + dt_bias[h])
//   decay_gate_grad  da = dg * -exp(a_log[h]) sigmoid(a + dt_bias[h]) and dg * g per
//                    element (summed over rows by the launcher for a_log and dt_bias)
// softplus as PyTorch computes it (x above 20 passes through), with log1p's accuracy
// for very negative x: log(w) u / (w - 1) where w = 1 + u, u = exp(x).
fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  let u = exp(x);
  let w = 1.0 + u;
  if (w == 1.0) { return u; }
  return log(w) * u / (w - 1.0);
}

@group(0) @binding(1) var<storage, read> gd_a: array<f32>;
@group(0) @binding(2) var<storage, read> gd_alog: array<f32>;
@group(0) @binding(3) var<storage, read> gd_dt: array<f32>;
@group(0) @binding(4) var<storage, read_write> gd_out: array<f32>;

@compute @workgroup_size(256)
fn decay_gate(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let h = i % p.hv;
  gd_out[i] = -exp(gd_alog[h]) * softplus(gd_a[i] + gd_dt[h]);
}

@group(0) @binding(4) var<storage, read> gd_dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> gd_da: array<f32>;
@group(0) @binding(6) var<storage, read_write> gd_dalog: array<f32>;

@compute @workgroup_size(256)
fn decay_gate_grad(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let h = i % p.hv;
  let x = gd_a[i] + gd_dt[h];
  let amp = exp(gd_alog[h]);
  let dy = gd_dy[i];
  gd_da[i] = -dy * amp / (1.0 + exp(-x));
  gd_dalog[i] = -dy * amp * softplus(x);
}
