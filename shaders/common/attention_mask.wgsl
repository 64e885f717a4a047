// What every flash-attention kernel reads the same way (shaders/attention.wgsl,
// shaders/attention_tensor.wgsl): the uniform, left padding, which keys a query row
// sees, and the key tiles a tile of query rows must visit. The including file declares
// BR (query rows a tile) and BC (keys a tile).

// A finite stand-in for -inf, so fully masked rows never compute inf - inf.
const MASKED: f32 = -1.0e30;

struct Params {
  tq: u32,
  s: u32,        // visible key rows
  s_cap: u32,    // key rows stored per (batch row, kv head)
  q_offset: u32,
  hq: u32,
  hkv: u32,
  group: u32,
  causal: u32,
  has_pad: u32,  // 0: no pad_left tensor (binding 4 then holds an unrelated buffer)
  rows: u32,     // B * Hq * Tq (delta, decode_combine)
  scale: f32,
  splits: u32,      // decode: parts each row's keys are cut into (1: whole)
  split_keys: u32,  // decode: keys of each part
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read> pad_left: array<i32>;

fn pad_of(b: u32) -> u32 {
  if (p.has_pad == 0u) { return 0u; }
  return u32(max(pad_left[b], 0));
}

// Whether query row i (of the head) sees key j: inside the sequence, past the padding,
// and, if causal, not after the row's own position.
fn visible(i: u32, j: u32, pad: u32) -> bool {
  let pos = p.q_offset + i;
  return i < p.tq && j < p.s && j >= pad && pos >= pad && (p.causal == 0u || j <= pos);
}

// Whether query row i sees every key j0 .. j0 + n - 1: visible() of each, at once.
fn sees_all(i: u32, j0: u32, n: u32, pad: u32) -> bool {
  let pos = p.q_offset + i;
  return i < p.tq && pos >= pad && j0 >= pad && j0 + n <= p.s && (p.causal == 0u || j0 + n <= pos + 1u);
}

// Keys [start, end) that the query tile at rows r0.. may see; start is tile-aligned.
fn key_range(r0: u32, pad: u32) -> vec2u {
  let last = min(r0 + BR, p.tq) - 1u + p.q_offset;
  var end = p.s;
  if (p.causal != 0u) { end = min(end, last + 1u); }
  if (last < pad) { end = 0u; }
  return vec2u((min(pad, p.s) / BC) * BC, end);
}
