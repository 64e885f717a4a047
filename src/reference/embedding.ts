// CPU references for the embedding gather and its weight gradient (f64 accumulation).

/** out [ids.length, h] = weight rows picked by ids. */
export function embeddingForward(weight: Float32Array, h: number, ids: ArrayLike<number>): Float32Array {
  const out = new Float32Array(ids.length * h);
  for (let n = 0; n < ids.length; n++) out.set(weight.subarray(ids[n] * h, (ids[n] + 1) * h), n * h);
  return out;
}

/** dweight [vocab, h]: each position's gradient row added to the row of its id. */
export function embeddingBackward(g: Float32Array, h: number, ids: ArrayLike<number>, vocab: number): Float32Array {
  const acc = new Float64Array(vocab * h);
  for (let n = 0; n < ids.length; n++) {
    for (let j = 0; j < h; j++) acc[ids[n] * h + j] += g[n * h + j];
  }
  return Float32Array.from(acc);
}
