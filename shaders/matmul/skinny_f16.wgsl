// Skinny products with f16 weights: the kernels of common/skinny.wgsl (a few rows by
// a weight stored [N, K], for decoding), each weight held as f16 pairs, u32 [N, K / 2]
// (element 2j in the low half of word j, as pack_f16 in shaders/half.wgsl writes
// them). A lane reads 4 weights as one vec2u and widens them with unpack2x16float,
// which needs no shader-f16, so every adapter runs these; the arithmetic, A, bias,
// residual and C stay f32. A decode step reads each weight once, so its time is the
// weights' bytes: half of the f32 kernels'.

// #include "common/skinny.wgsl"

@group(0) @binding(2) var<storage, read> h0: array<vec2u>;
@group(0) @binding(3) var<storage, read> h1: array<vec2u>;
@group(0) @binding(4) var<storage, read> h2: array<vec2u>;

fn halves(w: vec2u) -> vec4f { return vec4f(unpack2x16float(w.x), unpack2x16float(w.y)); }
fn skinny_w0(i: u32) -> vec4f { return halves(h0[i]); }
fn skinny_w1(i: u32) -> vec4f { return halves(h1[i]); }
fn skinny_w2(i: u32) -> vec4f { return halves(h2[i]); }
