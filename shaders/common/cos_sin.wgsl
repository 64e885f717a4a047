// cos and sin of the large angles rotary embeddings reach (rope.wgsl, row_layer.wgsl).

// (cos a, sin a): a = k pi/2 + r with |r| <= pi/4 (Cody-Waite: pi/2 split into three
// parts, the leading one of 8 bits so that k times it is exact for |k| < 2^16), then
// Cephes' sinf/cosf polynomials on r.
fn cos_sin(a: f32) -> vec2f {
  let k = round(a * 0.63661977236758134);
  let r = ((a - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
  let z = r * r;
  let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  switch (i32(k) & 3) {
    case 0: { return vec2f(c, s); }
    case 1: { return vec2f(-s, c); }
    case 2: { return vec2f(-c, -s); }
    default: { return vec2f(s, -c); }
  }
}
