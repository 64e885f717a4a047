// Embedding gather and its weight gradient, over f32 rows of width H.
//   gather:   out[n, h] = weight[ids[n], h]; one element per invocation, 256 per
//             workgroup, grid folded into 2D.
//   grad:     dweight[id, h] = sum of g[n, h] over the positions n holding token id.
//             WGSL has no float atomics, so the CPU groups the positions by id and
//             uploads a plan (u32): unique ids [0, u), offsets [u, 2u + 1) into the
//             position list, positions [2u + 1, 2u + 1 + N). Workgroup w owns unique
//             id w / col_blocks and 256 columns of it; each invocation sums one column
//             over that id's positions in ascending order, so the result is
//             deterministic and rows of absent ids are never written.

struct Params {
  n: u32,          // gather: elements of out; grad: unique ids
  h: u32,          // row width
  vocab: u32,      // rows of weight
  col_blocks: u32, // grad: ceil(h / 256)
}

@group(0) @binding(0) var<uniform> p: Params;

const WG: u32 = 256u;

@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn gather(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
  if (i >= p.n) { return; }
  let row = u32(ids[i / p.h]);
  // Ids are range-checked on the CPU; the clamp only keeps a bad upload in bounds.
  out[i] = weight[min(row, p.vocab - 1u) * p.h + i % p.h];
}

@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> plan: array<u32>;
@group(0) @binding(3) var<storage, read_write> dweight: array<f32>;

@compute @workgroup_size(256)
fn grad(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let w = wid.y * nwg.x + wid.x;
  let u = w / p.col_blocks;
  if (u >= p.n) { return; }
  let col = (w % p.col_blocks) * WG + lid.x;
  if (col >= p.h) { return; }
  let id = plan[u];
  let first = plan[p.n + u];
  let last = plan[p.n + u + 1u];
  let positions = 2u * p.n + 1u;
  var acc = 0.0;
  for (var k = first; k < last; k++) {
    acc += g[plan[positions + k] * p.h + col];
  }
  dweight[id * p.h + col] = acc;
}
