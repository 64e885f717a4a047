// A power-of-two scale for rounding a gradient to f16 (the tensor-core matmul's
// operands): s such that max|x| * s lies in [2^13, 2^14), far from f16's largest
// value (65504) and with its 10-bit fraction kept for every element down to
// max * 2^-27 (the normal range) and, coarser, to max * 2^-38 (subnormals). A power
// of two scales and unscales exactly.
//   absmax:       acc[0] = max |x| as f32 bits (atomicMax: non-negative floats order
//                 like their bits), acc[1] = 1 if any element is NaN or infinite.
//                 Grid-stride loop, 256 invocations per workgroup, tree reduction in
//                 workgroup memory, one atomic per workgroup. acc starts zeroed.
//   power_of_two: one invocation, over absmax's acc (bound as plain words): scale =
//                 [s, 1 / s]; s = 1 when x is empty, all zeros or not finite (the
//                 caller's non-finite check sees such a gradient).
//   product_scale: the same over two absmax results, for a sum of products (below).
// The entry points bind different variables at bindings 1 to 3.

const WG: u32 = 256u;
const TARGET_EXP: i32 = 14;

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> acc: array<atomic<u32>, 2>;

var<workgroup> partial: array<f32, WG>;
var<workgroup> bad: atomic<u32>;

@compute @workgroup_size(WG)
fn absmax(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  if (li == 0u) { atomicStore(&bad, 0u); }
  var m = 0.0;
  var nonfinite = false;
  let stride = nwg.x * nwg.y * WG;
  for (var i = (wid.y * nwg.x + wid.x) * WG + li; i < p.n; i += stride) {
    let v = abs(x[i]);
    // NaN fails every comparison; infinity fails this one.
    if (!(v <= 3.4028234e38)) { nonfinite = true; } else { m = max(m, v); }
  }
  partial[li] = m;
  workgroupBarrier();
  if (nonfinite) { atomicStore(&bad, 1u); }
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) { partial[li] = max(partial[li], partial[li + s]); }
    workgroupBarrier();
  }
  if (li == 0u) {
    atomicMax(&acc[0], bitcast<u32>(partial[0]));
    if (atomicLoad(&bad) != 0u) { atomicStore(&acc[1], 1u); }
  }
}

@group(0) @binding(1) var<storage, read> found: array<u32, 2>;
@group(0) @binding(2) var<storage, read_write> scale: array<f32, 2>;

// [s, 1 / s] for a positive finite m: m = fract * 2^e with fract in [0.5, 1), so
// m * 2^(TARGET_EXP - e) lies in [2^13, 2^14). The exponent stays inside f32's normal
// range both ways.
fn scale_for(m: f32) -> vec2f {
  let e = clamp(frexp(m).exp, -100, 100);
  return vec2f(ldexp(1.0, TARGET_EXP - e), ldexp(1.0, e - TARGET_EXP));
}

@compute @workgroup_size(1)
fn power_of_two() {
  let m = bitcast<f32>(found[0]);
  var s = vec2f(1.0);
  if (p.n != 0u && found[1] == 0u && m != 0.0) { s = scale_for(m); }
  scale[0] = s.x;
  scale[1] = s.y;
}

// product_scale: one invocation, over two absmax results a and b (bound as plain words):
// scale = [s, 1 / s], s a power of two with n * max|a| * max|b| * s in [2^13, 2^14),
// so that every sum of n products of an element of a * s with one of b stays inside
// f16's range (the tensor-core attention backward's dS, n = 2 HD); s = 1 where either
// is empty, all zeros or not finite.
@group(0) @binding(2) var<storage, read> found_b: array<u32, 2>;
@group(0) @binding(3) var<storage, read_write> product: array<f32, 2>;

@compute @workgroup_size(1)
fn product_scale() {
  let m = f32(p.n) * bitcast<f32>(found[0]) * bitcast<f32>(found_b[0]);
  var s = vec2f(1.0);
  if (found[1] == 0u && found_b[1] == 0u && m > 0.0 && m <= 3.4028234e38) { s = scale_for(m); }
  product[0] = s.x;
  product[1] = s.y;
}
