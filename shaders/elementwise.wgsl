// Elementwise kernels over f32 tensors.
//   unary:        y[i] = f(x[i]; alpha, beta)             (OP picks f)
//   unary_grad:   dx[i] = g[i] * f'(x[i]; alpha, beta)
//   binary:       y[i] = a[i] (op) b[i], same shape, contiguous
//   binary_bcast: the same with NumPy broadcasting; shapes and strides (0 on
//                 broadcast dims) for up to 8 dims come in the uniform
//   fill / add_inplace / axpy_inplace
// Layout: contiguous row-major. Tiling: one element per invocation, 256 per
// workgroup, the grid folded into 2D when it exceeds 65535 workgroups.

override OP: u32 = 0u;

struct Params {
  n: u32,
  rank: u32,
  _pad0: u32,
  _pad: u32,
  alpha: f32,
  beta: f32,
  _pad2: vec2f,
  shape: array<vec4u, 2>,   // output shape (binary_bcast)
  sa: array<vec4u, 2>,      // strides of a (0 where broadcast)
  sb: array<vec4u, 2>,      // strides of b
}

@group(0) @binding(0) var<uniform> p: Params;

fn dim(v: array<vec4u, 2>, i: u32) -> u32 { return v[i / 4u][i % 4u]; }

fn linear(wid: vec3u, lid: vec3u, nwg: vec3u) -> u32 {
  return (wid.y * nwg.x + wid.x) * 256u + lid.x;
}

fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }

fn unary_f(x: f32) -> f32 {
  switch OP {
    case 0u: { return -x; }
    case 1u: { return exp(x); }
    case 2u: { return log(x); }
    case 3u: { return sqrt(x); }
    case 4u: { return inverseSqrt(x); }
    case 5u: { return x * sigmoid(x); }                 // silu
    case 6u: { return sigmoid(x); }
    case 7u: { return tanh(x); }
    case 8u: { return max(x, 0.0); }                     // relu
    case 9u: { return abs(x); }
    case 10u: { return x * x; }
    case 11u: { return 1.0 / x; }
    case 12u: { return x * p.alpha + p.beta; }          // affine
    case 13u: { return clamp(x, p.alpha, p.beta); }
    case 14u: { return pow(x, p.alpha); }               // x >= 0 or integer alpha handled by caller
    default: { return x; }
  }
}

fn unary_df(x: f32) -> f32 {
  switch OP {
    case 0u: { return -1.0; }
    case 1u: { return exp(x); }
    case 2u: { return 1.0 / x; }
    case 3u: { return 0.5 / sqrt(x); }
    case 4u: { return -0.5 * inverseSqrt(x) / x; }
    case 5u: { let s = sigmoid(x); return s * (1.0 + x * (1.0 - s)); }
    case 6u: { let s = sigmoid(x); return s * (1.0 - s); }
    case 7u: { let t = tanh(x); return 1.0 - t * t; }
    case 8u: { return select(0.0, 1.0, x > 0.0); }
    case 9u: { return sign(x); }
    case 10u: { return 2.0 * x; }
    case 11u: { return -1.0 / (x * x); }
    case 12u: { return p.alpha; }
    case 13u: { return select(0.0, 1.0, x >= p.alpha && x <= p.beta); }
    case 14u: { return p.alpha * pow(x, p.alpha - 1.0); }
    default: { return 1.0; }
  }
}

fn binary_f(a: f32, b: f32) -> f32 {
  switch OP {
    case 0u: { return a + b; }
    case 1u: { return a - b; }
    case 2u: { return a * b; }
    case 3u: { return a / b; }
    case 4u: { return max(a, b); }
    case 5u: { return min(a, b); }
    case 6u: { return select(0.0, 1.0, a == b); }
    case 7u: { return select(0.0, 1.0, a > b); }
    default: { return a; }
  }
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn unary(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i < p.n) { y[i] = unary_f(x[i]); }
}

@group(0) @binding(1) var<storage, read_write> filled: array<f32>;

@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i < p.n) { filled[i] = p.alpha; }
}

// y += alpha * x (gradient accumulation, optimizer updates)
@compute @workgroup_size(256)
fn axpy_inplace(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i < p.n) { y[i] = y[i] + p.alpha * x[i]; }
}

@group(0) @binding(2) var<storage, read> g_in: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn unary_grad(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i < p.n) { dx[i] = g_in[i] * unary_df(x[i]); }
}

@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn binary(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i < p.n) { out[i] = binary_f(a[i], b[i]); }
}

@compute @workgroup_size(256)
fn binary_bcast(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear(wid, lid, nwg);
  if (i >= p.n) { return; }
  var rem = i;
  var ia = 0u;
  var ib = 0u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let du = u32(d);
    let s = dim(p.shape, du);
    let c = rem % s;
    rem = rem / s;
    ia += c * dim(p.sa, du);
    ib += c * dim(p.sb, du);
  }
  out[i] = binary_f(a[ia], b[ib]);
}
