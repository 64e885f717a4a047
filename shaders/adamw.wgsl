// Optimizer kernels over one f32 parameter tensor of n elements.
//   step:   PyTorch's AdamW in one pass. With gr = grad * grad_scale (the clipping
//           factor, so clipping needs no pass of its own):
//             p  = p * (1 - lr * wd)                     (decoupled weight decay)
//             m  = beta1 * m + (1 - beta1) * gr
//             v  = beta2 * v + (1 - beta2) * gr^2
//             p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
//           with step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t) computed
//           in f64 on the CPU. One element per invocation, 256 per workgroup.
//   sumsq:  partial sums of squares for the global gradient norm: workgroup k sums
//           elements [k * CHUNK, (k + 1) * CHUNK) (strided per invocation, then a tree
//           in workgroup memory) into partials[offset + k], and counts the NaN and
//           infinite elements it saw into partials[total + offset + k]. The count is
//           taken on the bits, which no fast-math assumption can fold away, so a
//           non-finite gradient is caught whatever the GPU does with NaN arithmetic.
// Grids fold into 2D past 65535 workgroups.

struct Params {
  n: u32,
  offset: u32,   // sumsq: first partial of this tensor
  total: u32,    // sumsq: partials of all tensors (where the counts start)
  decay: f32,
  beta1: f32,
  beta2: f32,
  step_size: f32,
  bc2_sqrt: f32,
  eps: f32,
  grad_scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;
const PER_THREAD: u32 = 16u;
const CHUNK: u32 = WG * PER_THREAD;

@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn step(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
  if (i >= p.n) { return; }
  let gr = grad[i] * p.grad_scale;
  let mi = p.beta1 * m[i] + (1.0 - p.beta1) * gr;
  let vi = p.beta2 * v[i] + (1.0 - p.beta2) * gr * gr;
  m[i] = mi;
  v[i] = vi;
  param[i] = param[i] * p.decay - p.step_size * mi / (sqrt(vi) / p.bc2_sqrt + p.eps);
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;

var<workgroup> acc: array<f32, WG>;
var<workgroup> nonfinite: atomic<u32>;

@compute @workgroup_size(256)
fn sumsq(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let k = wid.y * nwg.x + wid.x;
  let base = k * CHUNK;
  if (base >= p.n) { return; }
  if (lid.x == 0u) { atomicStore(&nonfinite, 0u); }
  workgroupBarrier();
  var s = 0.0;
  var bad = 0u;
  for (var j = 0u; j < PER_THREAD; j++) {
    let i = base + j * WG + lid.x;
    if (i < p.n) {
      let e = x[i];
      bad += select(0u, 1u, (bitcast<u32>(e) & 0x7f800000u) == 0x7f800000u);
      s += e * e;
    }
  }
  if (bad != 0u) { atomicAdd(&nonfinite, bad); }
  acc[lid.x] = s;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h = h / 2u) {
    if (lid.x < h) { acc[lid.x] = acc[lid.x] + acc[lid.x + h]; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    partials[p.offset + k] = acc[0];
    partials[p.total + p.offset + k] = f32(atomicLoad(&nonfinite));
  }
}
