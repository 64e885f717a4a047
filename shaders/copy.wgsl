// Strided copies of 32-bit elements (any dtype: moved as raw bits).
//   gather:  out[i] = src[offset + sum_d coord_d(i) * stride_d]  (permute, slice)
//   scatter: dst[offset + sum_d coord_d(i) * stride_d] = src[i]  (concat, slice backward)
// coord(i) is i unravelled over `shape` (row-major, up to 8 dims). One element per
// invocation, 256 per workgroup, grid folded into 2D.
//   gather4, scatter4: the same with vec4u elements, for copies whose runs along the
// last dim are whole 16-byte words on both sides (a head permute's rows of head dim
// floats): a quarter of the invocations, each unravelling its index once for 16 bytes.
// The launcher passes shape, strides, offset and n in vec4 units.

struct Params {
  n: u32,
  rank: u32,
  offset: u32,
  _pad: u32,
  shape: array<vec4u, 2>,
  stride: array<vec4u, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn dim(v: array<vec4u, 2>, i: u32) -> u32 { return v[i / 4u][i % 4u]; }

fn strided(i: u32) -> u32 {
  var rem = i;
  var off = p.offset;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let du = u32(d);
    let s = dim(p.shape, du);
    off += (rem % s) * dim(p.stride, du);
    rem = rem / s;
  }
  return off;
}

@group(0) @binding(1) var<storage, read> src4: array<vec4u>;
@group(0) @binding(2) var<storage, read_write> dst4: array<vec4u>;

@compute @workgroup_size(256)
fn gather(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid.x;
  if (i < p.n) { dst[i] = src[strided(i)]; }
}

@compute @workgroup_size(256)
fn scatter(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid.x;
  if (i < p.n) { dst[strided(i)] = src[i]; }
}

@compute @workgroup_size(256)
fn gather4(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid.x;
  if (i < p.n) { dst4[i] = src4[strided(i)]; }
}

@compute @workgroup_size(256)
fn scatter4(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid.x;
  if (i < p.n) { dst4[strided(i)] = src4[i]; }
}
