// Skinny f32 products: a few rows by a weight stored [N, K], for decoding. The
// kernels, their variants and their tiling are in common/skinny.wgsl; here the weights
// are f32, read as vec4s.

// #include "common/skinny.wgsl"

@group(0) @binding(3) var<storage, read> b1: array<vec4f>;
@group(0) @binding(4) var<storage, read> b2: array<vec4f>;

fn skinny_w0(i: u32) -> vec4f { return b[i]; }
fn skinny_w1(i: u32) -> vec4f { return b1[i]; }
fn skinny_w2(i: u32) -> vec4f { return b2[i]; }
