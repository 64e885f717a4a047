// SwiGLU, the gated MLP activation: y = silu(gate) * up, silu(a) = a * sigmoid(a).
//   forward:  y[i] from gate[i], up[i].
//   backward: both input gradients in one pass, with s = sigmoid(gate):
//             dup = g * gate * s,  dgate = g * up * s * (1 + gate * (1 - s)).
// Layout: gate, up, y contiguous and of one shape. Tiling: one element per
// invocation, 256 per workgroup, grid folded into 2D.

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;

fn index(wid: vec3u, lid: vec3u, nwg: vec3u) -> u32 { return (wid.y * nwg.x + wid.x) * WG + lid.x; }

fn sigmoid(a: f32) -> f32 { return 1.0 / (1.0 + exp(-a)); }

@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let a = gate[i];
  y[i] = a * sigmoid(a) * up[i];
}

@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> dgate: array<f32>;
@group(0) @binding(5) var<storage, read_write> dup: array<f32>;

@compute @workgroup_size(256)
fn backward(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = index(wid, lid, nwg);
  if (i >= p.n) { return; }
  let a = gate[i];
  let s = sigmoid(a);
  dup[i] = g[i] * a * s;
  dgate[i] = g[i] * up[i] * s * (1.0 + a * (1.0 - s));
}
