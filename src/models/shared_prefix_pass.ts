// A pass over rows that continue prefixes they share (PrefixBatch), as every model class
// runs it: the prefixes' tokens and then the rows' as one list, so each product, norm
// and MLP sees a token once and a prefix runs once for all its rows, taped like any
// forward. Only the token mixers see the layout: attention here (each prefix over
// itself, each row over its prefix's keys and values, then its own), Qwen3.5's linear
// attention in its model (each row's recurrence runs over its prefix's inputs again).

import { attention } from '../tensor/ops/attention.ts';
import { embedding } from '../tensor/ops/embedding.ts';
import { ropeHeads, type RopeOptions } from '../tensor/ops/rope.ts';
import { concat, permute, reshape, slice } from '../tensor/ops/shape_ops.ts';
import { tensor, type Tensor } from '../tensor/tensor.ts';
import { checkPrefixBatch, positionIds, type PrefixBatch, type PrefixedRows, type SharedPrefixLayout, type SharedPrefixStep } from './token_batch.ts';

export interface SharedPrefixInputs extends SharedPrefixLayout {
  /** The prefixes' ids, left-padded, then the rows', right-padded. */
  ids: Int32Array;
  /** Tokens of the prefixes' part (prefixes x their longest). */
  front: number;
}

/** Checks a shared-prefix batch and lays it out as one list of tokens, with the positions each part's rotary embedding reads. */
export function sharedPrefixInputs(prefixes: PrefixBatch, rows: PrefixedRows): SharedPrefixInputs {
  const rowPad = checkPrefixBatch(prefixes, rows);
  const front = prefixes.batch * prefixes.seq;
  const ids = new Int32Array(front + rows.batch * rows.seq);
  ids.set(prefixes.ids);
  ids.set(rows.ids, front);
  return {
    ids,
    front,
    rows: {
      batch: rows.batch,
      seq: rows.seq,
      // A row's first token sits right after its prefix: position prefix length + t.
      positions: tensor(positionIds(rows.batch, rows.seq, rowPad, prefixes.seq), [rows.batch, rows.seq], 'i32'),
      pad: tensor(rowPad, [rows.batch], 'i32'),
    },
    prefixes: {
      batch: prefixes.batch,
      seq: prefixes.seq,
      positions: tensor(positionIds(prefixes.batch, prefixes.seq, prefixes.padLeft), [prefixes.batch, prefixes.seq], 'i32'),
      pad: tensor(prefixes.padLeft, [prefixes.batch], 'i32'),
      of: prefixes.of,
    },
  };
}

/** Rows of x [G, ...] picked by `of`, as [of.length, ...]; the backward sums each row's picks' gradients into it (the embedding op's). */
export function prefixRows(x: Tensor, of: Int32Array): Tensor {
  const [g, ...rest] = x.shape;
  return reshape(embedding(reshape(x, [g, x.size / g]), of, [of.length]), [of.length, ...rest]);
}

/** x [prefixes' G x P + rows' B x T, ...] as the prefixes' [G, P, ...] and the rows' [B, T, ...]. */
export function splitTokens(x: Tensor, rows: { batch: number; seq: number }, pre: SharedPrefixStep, axis = 0): { prefix: Tensor; rows: Tensor } {
  const front = pre.batch * pre.seq;
  const rest = x.shape.slice(axis + 1);
  return {
    prefix: reshape(slice(x, axis, 0, front), [pre.batch, pre.seq, ...rest]),
    rows: reshape(slice(x, axis, front, x.shape[axis]), [rows.batch, rows.seq, ...rest]),
  };
}

/**
 * Causal attention over one list of tokens, q [N, heads, D] and k, v [N, kvHeads, D]
 * (after their norms, before the rotary embedding), N the prefixes' G x P then the
 * rows' B x T: each prefix over itself; each row over its prefix's keys and values,
 * picked by row (prefixRows), then its own, its keys [its prefix's padding, its
 * prefix, its tokens] with the padding masked as left padding. Returns [N, heads x D].
 */
export function attentionAfterPrefixes(q: Tensor, k: Tensor, v: Tensor, { rows, prefixes: pre }: SharedPrefixLayout, ropeOpts: RopeOptions): Tensor {
  const heads = (t: Tensor, positions: Tensor | null) => (positions ? ropeHeads(t, positions, ropeOpts) : permute(t, [0, 2, 1, 3]));
  const both = (t: Tensor, rotate: boolean) => {
    const s = splitTokens(t, rows, pre);
    return { prefix: heads(s.prefix, rotate ? pre.positions : null), rows: heads(s.rows, rotate ? rows.positions : null) };
  };
  const qs = both(q, true);
  const ks = both(k, true);
  const vs = both(v, false);
  const withPrefix = (s: { prefix: Tensor; rows: Tensor }) => concat([prefixRows(s.prefix, pre.of), s.rows], 2);
  const op = attention(qs.prefix, ks.prefix, vs.prefix, { padLeft: pre.pad });
  const or = attention(qs.rows, withPrefix(ks), withPrefix(vs), { padLeft: rows.pad });
  const width = q.shape[1] * q.shape[2];
  return concat([reshape(permute(op, [0, 2, 1, 3]), [pre.batch * pre.seq, width]), reshape(permute(or, [0, 2, 1, 3]), [rows.batch * rows.seq, width])], 0);
}
