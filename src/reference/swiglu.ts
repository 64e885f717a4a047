// CPU references for SwiGLU, y = silu(gate) * up (f64 math).

const sigmoid = (a: number) => 1 / (1 + Math.exp(-a));

export function swigluForward(gate: Float32Array, up: Float32Array): Float32Array {
  return gate.map((a, i) => a * sigmoid(a) * up[i]);
}

export function swigluBackward(gate: Float32Array, up: Float32Array, g: Float32Array): { dgate: Float32Array; dup: Float32Array } {
  const dgate = new Float32Array(gate.length);
  const dup = new Float32Array(gate.length);
  for (let i = 0; i < gate.length; i++) {
    const s = sigmoid(gate[i]);
    dup[i] = g[i] * gate[i] * s;
    dgate[i] = g[i] * up[i] * s * (1 + gate[i] * (1 - s));
  }
  return { dgate, dup };
}
