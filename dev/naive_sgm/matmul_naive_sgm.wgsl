// The naive tensor-core matmul that docs/PERFORMANCE.md reports crashing at 2048^3, rebuilt
// to find out why (dev/naive_sgm/repro.ts runs it; no training path uses it):
//   C = A @ B, A f16 [M, K], B f16 [K, N], C f32 [M, N], row-major and contiguous.
// No workgroup memory: one subgroup per workgroup owns a 32x32 block of C as 2x2
// 16x16 f32 accumulators and loads its f16 fragments straight from the storage
// buffers, 16 columns of K at a time. M, N and K must be multiples of 32, 32 and 16
// (the harness only asks for such sizes), so no fragment reaches past a matrix.
// Workgroup (x, y) of the grid takes the block at row 32 (y + row_base), column 32 x:
// the harness may cover the grid with several dispatches of a band of rows each.

enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

struct Params {
  m: u32,
  n: u32,
  k: u32,
  row_base: u32,    // first block row of this dispatch
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f16>;
@group(0) @binding(2) var<storage, read> b: array<f16>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Result = subgroup_matrix_result<f32, 16, 16>;

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wid: vec3u) {
  let row = (wid.y + p.row_base) * 32u;
  let col = wid.x * 32u;
  var c00: Result;
  var c01: Result;
  var c10: Result;
  var c11: Result;
  for (var k = 0u; k < p.k; k += 16u) {
    let l0 = subgroupMatrixLoad<Left, row_major>(&a, row * p.k + k, p.k);
    let l1 = subgroupMatrixLoad<Left, row_major>(&a, (row + 16u) * p.k + k, p.k);
    let r0 = subgroupMatrixLoad<Right, row_major>(&b, k * p.n + col, p.n);
    let r1 = subgroupMatrixLoad<Right, row_major>(&b, k * p.n + col + 16u, p.n);
    c00 = subgroupMatrixMultiplyAccumulate(l0, r0, c00);
    c01 = subgroupMatrixMultiplyAccumulate(l0, r1, c01);
    c10 = subgroupMatrixMultiplyAccumulate(l1, r0, c10);
    c11 = subgroupMatrixMultiplyAccumulate(l1, r1, c11);
  }
  subgroupMatrixStore<row_major>(&c, row * p.n + col, c00, p.n);
  subgroupMatrixStore<row_major>(&c, row * p.n + col + 16u, c01, p.n);
  subgroupMatrixStore<row_major>(&c, (row + 16u) * p.n + col, c10, p.n);
  subgroupMatrixStore<row_major>(&c, (row + 16u) * p.n + col + 16u, c11, p.n);
}
