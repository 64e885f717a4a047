// The uniform and the operands of every matmul kernel (shaders/matmul/): batched
//   C[b] = act(op(A[b]) @ op(B[b]) + bias)            (C[b] += ... with ACCUM)
// op(A) is A stored [M, K] or, with TRANS_A, A stored [K, M] and read transposed;
// op(B) is B stored [K, N] or, with TRANS_B, B stored [N, K]. All row-major and
// contiguous; batch b starts offset_a + stride_a * b elements into A (likewise B,
// C), so a stride of 0 broadcasts an operand. bias is [N], added to every row. Sizes and
// strides come in the uniform; the variants are override constants. A and B are bound
// as vec4 arrays.

// Kernels that walk a grid of output tiles take them in groups of GROUP_M tile rows,
// so the workgroups running at once share A and B panels in L2.
const GROUP_M = 8u;

struct Params {
  m: u32,
  n: u32,
  k: u32,
  batch_base: u32,       // batch index of workgroup z = 0
  stride_a: u32,
  stride_b: u32,
  stride_c: u32,
  tiles_m: u32,
  tiles_n: u32,
  offset_a: u32,
  offset_b: u32,
  offset_c: u32,
  k_split: u32,          // tiled SPLIT_K: k per workgroup z, a multiple of BK; STREAM: K slices per workgroup
  tile_base: u32,        // index (in the walk) of this dispatch's first tile
  tile_count: u32,       // tiles from tile_base on: the tensor-core kernel's dispatch, the tiled kernel's stream
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4f>;
@group(0) @binding(2) var<storage, read> b: array<vec4f>;
