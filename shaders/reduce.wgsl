// Reductions of f32 tensors viewed as [outer, R, inner] over the middle axis.
//   reduce_rows:  inner == 1; one 256-wide workgroup per row, strided loads,
//                 tree reduction in workgroup memory.
//   reduce_cols:  inner > 1; one workgroup per (outer, 32 consecutive inner): eight
//                 slices of rows, 32 lanes each reading neighbouring addresses, the
//                 slices' results combined in workgroup memory. (One invocation per
//                 output walking all of R left a [4096, 896] bias gradient to 896
//                 invocations: 450 us on the H200.) When those workgroups are too
//                 few for the GPU (a [32768, 256] bias gradient: 8), grid z cuts R
//                 into parts of `span` rows, each workgroup writing its part's
//                 result (finished, so a mean's parts are sums scaled by 1/R) to
//                 y[outer, parts, inner] for a second pass to combine.
// OP: 0 sum, 1 max, 2 mean (sum scaled by 1/R).

override OP: u32 = 0u;

struct Params {
  outer: u32,
  r: u32,
  inner: u32,
  /** reduce_cols: rows per part of R (R itself when it is not cut). */
  span: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const WG: u32 = 256u;
var<workgroup> partial: array<f32, WG>;

fn identity() -> f32 {
  if (OP == 1u) { return -3.4028234e38; }
  return 0.0;
}

fn combine(a: f32, b: f32) -> f32 {
  if (OP == 1u) { return max(a, b); }
  return a + b;
}

fn finish(v: f32) -> f32 {
  if (OP == 2u) { return v / f32(p.r); }
  return v;
}

@compute @workgroup_size(256)
fn reduce_rows(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= p.outer) { return; }
  let base = row * p.r;
  var acc = identity();
  for (var i = lid.x; i < p.r; i += WG) { acc = combine(acc, x[base + i]); }
  partial[lid.x] = acc;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid.x < s) { partial[lid.x] = combine(partial[lid.x], partial[lid.x + s]); }
    workgroupBarrier();
  }
  if (lid.x == 0u) { y[row] = finish(partial[0]); }
}

// Columns per reduce_cols workgroup (neighbouring lanes, neighbouring addresses) and
// the row slices its invocations split R into.
const COL_LANES: u32 = 32u;
const COL_SLICES: u32 = WG / COL_LANES;

@compute @workgroup_size(256)
fn reduce_cols(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let block = wid.y * nwg.x + wid.x;
  let blocks = (p.inner + COL_LANES - 1u) / COL_LANES;
  let o = block / blocks;
  let c = (block % blocks) * COL_LANES + lid.x % COL_LANES;
  let slice = lid.x / COL_LANES;
  let inside = o < p.outer && c < p.inner;
  let first = wid.z * p.span;
  let end = min(p.r, first + p.span);
  var acc = identity();
  if (inside) {
    let base = o * p.r * p.inner + c;
    for (var i = first + slice; i < end; i += COL_SLICES) { acc = combine(acc, x[base + i * p.inner]); }
  }
  partial[lid.x] = acc;
  workgroupBarrier();
  if (slice == 0u && inside) {
    var total = acc;
    for (var s = 1u; s < COL_SLICES; s++) { total = combine(total, partial[s * COL_LANES + lid.x]); }
    y[(o * nwg.z + wid.z) * p.inner + c] = finish(total);
  }
}
