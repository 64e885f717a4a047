// What the gated delta rule's forward (delta_rule.wgsl) and backward
// (delta_rule_backward.wgsl) share: the chunk and block sizes, the uniform, the index
// helpers and the per-row gates gb[bh, tp] = (gamma, beta, valid, 0) written by `gates`.

override CHUNK: u32 = 64u;  // CS
override KMAX: u32 = 128u;  // Dk rounded up: rows of the state block
override BV: u32 = 32u;     // value columns per state-scan workgroup

const WG: u32 = 256u;

struct Params {
  n: u32,
  b: u32,
  t: u32,
  hk: u32,
  hv: u32,
  dk: u32,
  dv: u32,
  nc: u32,
  cs: u32,
  offset: u32,
  has_pad: u32,
  has_state: u32,
  scale: f32,
  nvb: u32,     // value-column blocks
  group: u32,   // Hv / Hk
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

fn linear(wid: vec3u, lid: vec3u, nwg: vec3u) -> u32 { return (wid.y * nwg.x + wid.x) * WG + lid.x; }
fn flat_group(wid: vec3u, nwg: vec3u) -> u32 { return wid.y * nwg.x + wid.x; }
fn tp_len() -> u32 { return p.nc * p.cs; }
// First element of row (b, t) of value head h's key head in q/k, and of v/out.
fn qk_at(b: u32, t: u32, h: u32) -> u32 { return ((b * p.t + t) * p.hk + h / p.group) * p.dk; }
fn v_at(b: u32, t: u32, h: u32) -> u32 { return ((b * p.t + t) * p.hv + h) * p.dv; }

// (gamma, beta, valid, 0) per [bh, tp] row, as `gates` wrote them.
@group(0) @binding(1) var<storage, read> gb: array<vec4f>;
