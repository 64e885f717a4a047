// Gated delta rule, backward of the chunked form in shaders/delta_rule.wgsl (same
// layouts, Params and names; the launcher first re-runs its gates, pairs, tinv, wu and
// states passes to get gb, P, KK, T, W, H and Vn). Per (b, h) and chunk c, with dO
// given and dH_c the gradient of the state after chunk c (zero after the last chunk):
//   dVn = Kd dH_c + P^T dO                      Kd = diag(e^(gamma_last - gamma)) K
//   dH_(c-1) = e^(gamma_last) dH_c + (diag(e^gamma) scale Q)^T dO - W^T dVn
//   dQe = dO S_c^T,  dKd = Vn dH_c^T,  dW = -dVn S_c^T,  dP = lower(dO Vn^T)
//   dT = strictly-lower(dVn (diag(beta) V)^T + dW (diag(beta e^gamma) K)^T)
//   dA = -T^T dT T^T (strictly lower)
// and from those the gradients of q, k, v, beta and gamma (then g, a reverse cumulative
// sum of dgamma inside each chunk).
// Entry points, in launch order:
//   dstates  the reverse scan: DH [bh, NC, Dk, Dv] and dVn; one (bh, BV value columns)
//            per workgroup, dH's block in workgroup memory
//   dmats    DM [bh, Tp, 3, Dk] = (dQe, dKd, dW); one entry per invocation
//   dpt      dP and dT [bh, Tp, CS]; one entry per invocation
//   da       dA = -T^T dT T^T over dT in place; one (bh, chunk) per workgroup
//   dqk      dq, dk [B, T, Hk, Dk], summed over the value heads sharing a key head
//   dv       dv [B, T, Hv, Dv]
//   drows    per row: (dbeta, dgamma, its share of the chunk-final decay's gradient)
//   dgates   dg and dbeta [B, T, Hv]; one (bh, chunk) per invocation

// #include "common/delta_rule.wgsl"

// Private arrays need a constant size: the largest chunk the launcher allows.
const MAX_CHUNK: u32 = 64u;

@group(0) @binding(2) var<storage, read> ds_q: array<f32>;
@group(0) @binding(3) var<storage, read> ds_k: array<f32>;
@group(0) @binding(4) var<storage, read> ds_w: array<f32>;
@group(0) @binding(5) var<storage, read> ds_p: array<f32>;
@group(0) @binding(6) var<storage, read> ds_do: array<f32>;
@group(0) @binding(7) var<storage, read_write> ds_dh: array<f32>;
@group(0) @binding(8) var<storage, read_write> ds_dvn: array<f32>;

var<workgroup> dhblk: array<f32, KMAX * BV>;
var<workgroup> dvnblk: array<f32, CHUNK * BV>;

@compute @workgroup_size(256)
fn dstates(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = flat_group(wid, nwg);
  let bh = g / p.nvb;
  let j0 = (g % p.nvb) * BV;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let cs = p.cs;
  let tl = tp_len();
  for (var e = lid.x; e < p.dk * BV; e += WG) { dhblk[e] = 0.0; }
  workgroupBarrier();
  for (var cc = 0u; cc < p.nc; cc++) {
    let c = p.nc - 1u - cc;
    let start = bh * tl + c * cs;
    let glast = gb[start + cs - 1u].x;
    for (var e = lid.x; e < p.dk * BV; e += WG) {
      let j = j0 + e % BV;
      if (j < p.dv) { ds_dh[((bh * p.nc + c) * p.dk + e / BV) * p.dv + j] = dhblk[e]; }
    }
    for (var e = lid.x; e < cs * BV; e += WG) {
      let jj = e % BV;
      let j = j0 + jj;
      let r = e / BV;
      var acc = 0.0;
      if (j < p.dv) {
        let gr = gb[start + r];
        if (gr.z > 0.0) {
          let ko = qk_at(b, c * cs + r, h);
          let ed = exp(glast - gr.x);
          for (var d = 0u; d < p.dk; d++) { acc += ed * ds_k[ko + d] * dhblk[d * BV + jj]; }
        }
        for (var s = r; s < cs; s++) {
          let ts = c * cs + s;
          if (ts >= p.t) { break; }
          acc += ds_p[(start + s) * cs + r] * ds_do[v_at(b, ts, h) + j];
        }
        ds_dvn[(start + r) * p.dv + j] = acc;
      }
      dvnblk[e] = acc;
    }
    workgroupBarrier();
    let el = exp(glast);
    for (var e = lid.x; e < p.dk * BV; e += WG) {
      let d = e / BV;
      let jj = e % BV;
      let j = j0 + jj;
      var acc = el * dhblk[e];
      for (var r = 0u; r < cs; r++) {
        let gr = gb[start + r];
        if (gr.z > 0.0 && j < p.dv) {
          let t = c * cs + r;
          acc += p.scale * exp(gr.x) * ds_q[qk_at(b, t, h) + d] * ds_do[v_at(b, t, h) + j];
        }
        acc -= ds_w[(start + r) * p.dk + d] * dvnblk[r * BV + jj];
      }
      dhblk[e] = acc;
    }
    workgroupBarrier();
  }
}

@group(0) @binding(1) var<storage, read> dm_do: array<f32>;
@group(0) @binding(2) var<storage, read> dm_h: array<f32>;
@group(0) @binding(3) var<storage, read> dm_vn: array<f32>;
@group(0) @binding(4) var<storage, read> dm_dh: array<f32>;
@group(0) @binding(5) var<storage, read> dm_dvn: array<f32>;
@group(0) @binding(6) var<storage, read_write> dm_out: array<f32>;

@compute @workgroup_size(256)
fn dmats(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let col = i % (3u * p.dk);
  let row = i / (3u * p.dk);
  let tp = row % tp_len();
  let bh = row / tp_len();
  let which = col / p.dk;
  let d = col % p.dk;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let hb = ((bh * p.nc + tp / p.cs) * p.dk + d) * p.dv;
  var acc = 0.0;
  if (which == 0u) {
    if (tp < p.t) {
      let o = v_at(b, tp, h);
      for (var j = 0u; j < p.dv; j++) { acc += dm_do[o + j] * dm_h[hb + j]; }
    }
  } else if (which == 1u) {
    for (var j = 0u; j < p.dv; j++) { acc += dm_vn[row * p.dv + j] * dm_dh[hb + j]; }
  } else {
    for (var j = 0u; j < p.dv; j++) { acc -= dm_dvn[row * p.dv + j] * dm_h[hb + j]; }
  }
  dm_out[i] = acc;
}

@group(0) @binding(2) var<storage, read> dp_k: array<f32>;
@group(0) @binding(3) var<storage, read> dp_v: array<f32>;
@group(0) @binding(4) var<storage, read> dp_do: array<f32>;
@group(0) @binding(5) var<storage, read> dp_vn: array<f32>;
@group(0) @binding(6) var<storage, read> dp_dvn: array<f32>;
@group(0) @binding(7) var<storage, read> dp_dm: array<f32>;
@group(0) @binding(8) var<storage, read_write> dp_dp: array<f32>;
@group(0) @binding(9) var<storage, read_write> dp_dt: array<f32>;

@compute @workgroup_size(256)
fn dpt(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let s = i % p.cs;
  let row = i / p.cs;
  let tp = row % tp_len();
  let bh = row / tp_len();
  let r = tp % p.cs;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let sp = tp - r + s;
  let srow = bh * tp_len() + sp;
  var dpv = 0.0;
  if (s <= r && tp < p.t) {
    let o = v_at(b, tp, h);
    for (var j = 0u; j < p.dv; j++) { dpv += dp_do[o + j] * dp_vn[srow * p.dv + j]; }
  }
  var dtv = 0.0;
  let gs = gb[srow];
  if (s < r && gs.z > 0.0) {
    let vo = v_at(b, sp, h);
    for (var j = 0u; j < p.dv; j++) { dtv += dp_dvn[row * p.dv + j] * dp_v[vo + j]; }
    dtv *= gs.y;
    let ko = qk_at(b, sp, h);
    let eb = gs.y * exp(gs.x);
    var kw = 0.0;
    for (var d = 0u; d < p.dk; d++) { kw += dp_dm[(row * 3u + 2u) * p.dk + d] * dp_k[ko + d]; }
    dtv += eb * kw;
  }
  dp_dp[i] = dpv;
  dp_dt[i] = dtv;
}

@group(0) @binding(1) var<storage, read> da_t: array<f32>;
@group(0) @binding(2) var<storage, read_write> da_m: array<f32>;

var<workgroup> dmat: array<f32, CHUNK * CHUNK>;

// X = dT T^T row by row (invocation m owns row m), then dA = -T^T X column by column
// (invocation m owns column m); T[r, s] is zero above the diagonal.
@compute @workgroup_size(CHUNK)
fn da(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let g = flat_group(wid, nwg);
  let bh = g / p.nc;
  let c = g % p.nc;
  let m = lid.x;
  let cs = p.cs;
  let base = (bh * tp_len() + c * cs) * cs;
  for (var r = 0u; r < cs; r++) { dmat[r * cs + m] = da_m[base + r * cs + m]; }
  workgroupBarrier();
  var keep: array<f32, MAX_CHUNK>;
  for (var s = 0u; s < m; s++) { keep[s] = dmat[m * cs + s]; }
  for (var col = 0u; col < cs; col++) {
    var acc = 0.0;
    for (var s = 0u; s < m && s <= col; s++) { acc += keep[s] * da_t[base + col * cs + s]; }
    dmat[m * cs + col] = acc;
  }
  workgroupBarrier();
  for (var r = 0u; r < cs; r++) { keep[r] = dmat[r * cs + m]; }
  for (var a = 0u; a < cs; a++) {
    var acc = 0.0;
    if (a > m) {
      for (var r = a; r < cs; r++) { acc += da_t[base + r * cs + a] * keep[r]; }
    }
    da_m[base + a * cs + m] = -acc;
  }
}

@group(0) @binding(2) var<storage, read> dk_q: array<f32>;
@group(0) @binding(3) var<storage, read> dk_k: array<f32>;
@group(0) @binding(4) var<storage, read> dk_dm: array<f32>;
@group(0) @binding(5) var<storage, read> dk_dp: array<f32>;
@group(0) @binding(6) var<storage, read> dk_da: array<f32>;
@group(0) @binding(7) var<storage, read> dk_t: array<f32>;
@group(0) @binding(8) var<storage, read_write> dk_dq: array<f32>;
@group(0) @binding(9) var<storage, read_write> dk_dk: array<f32>;

@compute @workgroup_size(256)
fn dqk(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let col = i % (2u * p.dk);
  let rest = i / (2u * p.dk);
  let kh = rest % p.hk;
  let bt = rest / p.hk;
  let t = bt % p.t;
  let b = bt / p.t;
  let is_k = col >= p.dk;
  let d = col % p.dk;
  let cs = p.cs;
  let c = t / cs;
  let r = t % cs;
  var acc = 0.0;
  for (var gi = 0u; gi < p.group; gi++) {
    let h = kh * p.group + gi;
    let bh = b * p.hv + h;
    let start = bh * tp_len() + c * cs;
    let row = start + r;
    let gr = gb[row];
    if (gr.z == 0.0) { continue; }
    if (!is_k) {
      var a = exp(gr.x) * dk_dm[row * 3u * p.dk + d];
      for (var s = 0u; s <= r; s++) {
        let gs = gb[start + s];
        if (gs.z == 0.0) { continue; }
        a += dk_dp[row * cs + s] * exp(gr.x - gs.x) * dk_k[qk_at(b, c * cs + s, h) + d];
      }
      acc += a * p.scale;
    } else {
      let glast = gb[start + cs - 1u].x;
      var a = exp(glast - gr.x) * dk_dm[(row * 3u + 1u) * p.dk + d];
      let eb = gr.y * exp(gr.x);
      for (var r2 = r; r2 < cs; r2++) {
        let g2 = gb[start + r2];
        if (g2.z == 0.0) { continue; }
        let row2 = start + r2;
        let e = exp(g2.x - gr.x);
        let o2 = qk_at(b, c * cs + r2, h) + d;
        a += dk_dp[row2 * cs + r] * e * p.scale * dk_q[o2];
        if (r2 > r) { a += dk_da[row2 * cs + r] * g2.y * e * dk_k[o2]; }
        a += dk_t[row2 * cs + r] * eb * dk_dm[(row2 * 3u + 2u) * p.dk + d];
      }
      for (var s = 0u; s < r; s++) {
        let gs = gb[start + s];
        if (gs.z == 0.0) { continue; }
        a += dk_da[row * cs + s] * gr.y * exp(gr.x - gs.x) * dk_k[qk_at(b, c * cs + s, h) + d];
      }
      acc += a;
    }
  }
  let o = ((b * p.t + t) * p.hk + kh) * p.dk + d;
  if (is_k) { dk_dk[o] = acc; } else { dk_dq[o] = acc; }
}

@group(0) @binding(2) var<storage, read> dv_t: array<f32>;
@group(0) @binding(3) var<storage, read> dv_dvn: array<f32>;
@group(0) @binding(4) var<storage, read_write> dv_out: array<f32>;

@compute @workgroup_size(256)
fn dv(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let j = i % p.dv;
  let rest = i / p.dv;
  let h = rest % p.hv;
  let bt = rest / p.hv;
  let t = bt % p.t;
  let b = bt / p.t;
  let start = (b * p.hv + h) * tp_len() + t - t % p.cs;
  let r = t % p.cs;
  let gr = gb[start + r];
  var acc = 0.0;
  if (gr.z > 0.0) {
    for (var r2 = r; r2 < p.cs; r2++) { acc += dv_t[(start + r2) * p.cs + r] * dv_dvn[(start + r2) * p.dv + j]; }
  }
  dv_out[i] = gr.y * acc;
}

@group(0) @binding(2) var<storage, read> dr_q: array<f32>;
@group(0) @binding(3) var<storage, read> dr_k: array<f32>;
@group(0) @binding(4) var<storage, read> dr_v: array<f32>;
@group(0) @binding(5) var<storage, read> dr_kk: array<f32>;
@group(0) @binding(6) var<storage, read> dr_p: array<f32>;
@group(0) @binding(7) var<storage, read> dr_t: array<f32>;
@group(0) @binding(8) var<storage, read> dr_dm: array<f32>;
@group(0) @binding(9) var<storage, read> dr_dvn: array<f32>;
@group(0) @binding(10) var<storage, read> dr_dp: array<f32>;
@group(0) @binding(11) var<storage, read> dr_da: array<f32>;
@group(0) @binding(12) var<storage, read> dr_h: array<f32>;
@group(0) @binding(13) var<storage, read> dr_dh: array<f32>;
@group(0) @binding(14) var<storage, read_write> dr_out: array<vec4f>;

// The chunk-final decay gamma_last also scales the carried state: its gradient gets
// e^gamma_last sum(S_c * dH_c), split over the chunk's rows (row r takes state rows
// r, r + CS, ...) so that dgates only has to add the rows up.
@compute @workgroup_size(256)
fn drows(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let tp = i % tp_len();
  let bh = i / tp_len();
  let b = bh / p.hv;
  let h = bh % p.hv;
  let cs = p.cs;
  let c = tp / cs;
  let r = tp % cs;
  let start = bh * tp_len() + c * cs;
  let glast = gb[start + cs - 1u].x;
  var carried = 0.0;
  for (var d = r; d < p.dk; d += cs) {
    let hb = ((bh * p.nc + c) * p.dk + d) * p.dv;
    for (var j = 0u; j < p.dv; j++) { carried += dr_h[hb + j] * dr_dh[hb + j]; }
  }
  var last = exp(glast) * carried;
  let gr = gb[i];
  if (gr.z == 0.0) {
    dr_out[i] = vec4f(0.0, 0.0, last, 0.0);
    return;
  }
  let qo = qk_at(b, tp, h);
  let vo = v_at(b, tp, h);
  var qdq = 0.0;
  var kdkd = 0.0;
  for (var d = 0u; d < p.dk; d++) {
    qdq += dr_q[qo + d] * dr_dm[i * 3u * p.dk + d];
    kdkd += dr_k[qo + d] * dr_dm[(i * 3u + 1u) * p.dk + d];
  }
  let ed = exp(glast - gr.x);
  last += ed * kdkd;
  var dgamma = p.scale * exp(gr.x) * qdq - ed * kdkd;
  var own_a = 0.0;
  for (var s = 0u; s <= r; s++) {
    dgamma += dr_dp[i * cs + s] * dr_p[i * cs + s];
    if (s < r) { own_a += dr_da[i * cs + s] * dr_kk[i * cs + s]; }
  }
  var kdw = 0.0;
  var vdv = 0.0;
  for (var r2 = r; r2 < cs; r2++) {
    let row2 = start + r2;
    dgamma -= dr_dp[row2 * cs + r] * dr_p[row2 * cs + r];
    if (r2 > r) { dgamma -= dr_da[row2 * cs + r] * gb[row2].y * dr_kk[row2 * cs + r]; }
    let tv = dr_t[row2 * cs + r];
    if (tv == 0.0) { continue; }
    var kw = 0.0;
    for (var d = 0u; d < p.dk; d++) { kw += dr_k[qo + d] * dr_dm[(row2 * 3u + 2u) * p.dk + d]; }
    var vw = 0.0;
    for (var j = 0u; j < p.dv; j++) { vw += dr_v[vo + j] * dr_dvn[row2 * p.dv + j]; }
    kdw += tv * kw;
    vdv += tv * vw;
  }
  let eg = exp(gr.x);
  dgamma += gr.y * own_a + gr.y * eg * kdw;
  dr_out[i] = vec4f(own_a + eg * kdw + vdv, dgamma, last, 0.0);
}

@group(0) @binding(2) var<storage, read> dg_rows: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> dg_g: array<f32>;
@group(0) @binding(4) var<storage, read_write> dg_beta: array<f32>;

@compute @workgroup_size(256)
fn dgates(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  let bh = i / p.nc;
  let c = i % p.nc;
  let b = bh / p.hv;
  let h = bh % p.hv;
  let start = bh * tp_len() + c * p.cs;
  var acc = 0.0;
  for (var r = 0u; r < p.cs; r++) { acc += dg_rows[start + r].z; }
  for (var rr = 0u; rr < p.cs; rr++) {
    let r = p.cs - 1u - rr;
    let row = dg_rows[start + r];
    acc += row.y;
    let t = c * p.cs + r;
    if (t >= p.t) { continue; }
    let ok = gb[start + r].z > 0.0;
    dg_g[(b * p.t + t) * p.hv + h] = select(0.0, acc, ok);
    dg_beta[(b * p.t + t) * p.hv + h] = select(0.0, row.x, ok);
  }
}
