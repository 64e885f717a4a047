// f32 to f16, for the f16 copies of weights that decode steps read
// (shaders/matmul/skinny_f16.wgsl).
//   pack_f16: dst[dst_offset + i] = the halves of src[2i] (low 16 bits) and src[2i + 1]
//             (high), each rounded to the nearest f16 and clamped to its finite range
//             first (pack2x16float leaves values past it undefined), for i < n words.
//             The offset lets several weights pack into one buffer, one after another.
// One word per invocation, 256 per workgroup, grid folded into 2D.

struct Params {
  n: u32,
  dst_offset: u32,
  _pad1: u32,
  _pad2: u32,
}

const F16_MAX: f32 = 65504.0;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec2f>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn pack_f16(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid.x;
  if (i >= p.n) { return; }
  dst[p.dst_offset + i] = pack2x16float(clamp(src[i], vec2f(-F16_MAX), vec2f(F16_MAX)));
}
