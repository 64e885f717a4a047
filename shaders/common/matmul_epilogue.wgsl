// The f32 matmul kernels' epilogue (shaders/matmul/ tiled, panels, skinny): the bias
// [N] bound as vec4s, C, and the activation applied after the bias.

override BIAS: bool = false;
override ACT: u32 = 0u;          // 0 none, 1 silu, 2 gelu (tanh form), 3 relu
override ACCUM: bool = false;

@group(0) @binding(3) var<storage, read> bias: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;
// C as vec4s: stores where C's row length, offset and batch stride are multiples of 4.
@group(0) @binding(4) var<storage, read_write> c4: array<vec4f>;

fn activate(x: vec4f) -> vec4f { return activate_by(x, ACT); }

fn activate_by(x: vec4f, act: u32) -> vec4f {
  switch act {
    case 1u: { return x / (1.0 + exp(-x)); }
    case 2u: {
      // tanh saturates long before |u| = 10; the clamp keeps an exp-based tanh finite.
      let u = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), vec4f(-10.0), vec4f(10.0));
      return 0.5 * x * (1.0 + tanh(u));
    }
    case 3u: { return max(x, vec4f(0.0)); }
    default: { return x; }
  }
}
