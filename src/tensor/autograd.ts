// Reverse-mode autodiff. Each differentiable op records a GradNode on its output
// (op name, inputs, backward closure); `backward` walks the graph from a scalar in
// reverse topological order. Leaf tensors that require grad accumulate into `.grad`,
// which survives the step's scope (so micro-batches can accumulate) until zeroGrad.

import { ShapeError } from './errors.ts';
import { keep } from './scope.ts';
import { fmt, sameShape } from './shape.ts';
import { Tensor, type GradNode } from './tensor.ts';

let enabled = true;

export function isGradEnabled(): boolean {
  return enabled;
}

/** Runs fn without recording gradients. */
export function noGrad<T>(fn: () => T): T {
  const prev = enabled;
  enabled = false;
  try {
    const r = fn();
    if (r instanceof Promise) {
      return r.finally(() => {
        enabled = prev;
      }) as T;
    }
    enabled = prev;
    return r;
  } catch (e) {
    enabled = prev;
    throw e;
  }
}

/** Runs fn recording gradients, even inside noGrad (a checkpointed layer's recompute during backward). */
export function withGrad<T>(fn: () => T): T {
  const prev = enabled;
  enabled = true;
  try {
    return fn();
  } finally {
    enabled = prev;
  }
}

/**
 * Records `backward` on `out` when any input needs a gradient. Backward closures
 * return fresh tensors (a `view` where the gradient passes through unchanged), never
 * the incoming gradient object itself. Returns `out`.
 */
export function record(out: Tensor, op: string, inputs: readonly Tensor[], backward: GradNode['backward']): Tensor {
  if (recordsGradient(inputs)) {
    out.requiresGrad = true;
    out.node = { op, inputs, backward };
  }
  return out;
}

/** Whether an op on `inputs` records a backward now (what `record` decides): gradients on and an input that needs one. */
export function recordsGradient(inputs: readonly (Tensor | null | undefined)[]): boolean {
  return enabled && inputs.some((t) => t?.requiresGrad);
}

/** Marks a tensor as a trainable leaf. */
export function requireGrad<T extends Tensor>(t: T, on = true): T {
  if (on && t.dtype !== 'f32') throw new ShapeError(`requireGrad: only f32 tensors can require grad, got ${t.dtype}`);
  t.requiresGrad = on;
  return t;
}

export interface BackwardHelpers {
  ones(like: Tensor): Tensor;
  add(a: Tensor, b: Tensor): Tensor;
  addInPlace(dst: Tensor, src: Tensor): void;
  copy(t: Tensor): Tensor;
}

let helpers: BackwardHelpers | null = null;

/** The op layer registers the kernels backward needs (keeps this module free of op imports). */
export function registerBackwardHelpers(h: BackwardHelpers): void {
  helpers = h;
}

function topoOrder(root: Tensor): Tensor[] {
  const order: Tensor[] = [];
  const seen = new Set<Tensor>();
  const stack: [Tensor, boolean][] = [[root, false]];
  while (stack.length) {
    const [t, expanded] = stack.pop()!;
    if (expanded) {
      order.push(t);
      continue;
    }
    if (seen.has(t)) continue;
    seen.add(t);
    stack.push([t, true]);
    for (const inp of t.node?.inputs ?? []) if (inp.requiresGrad && !seen.has(inp)) stack.push([inp, false]);
  }
  return order.reverse();
}

/**
 * Back-propagates from `root` (a scalar unless `grad` is given). Intermediate gradients
 * are freed as soon as they are consumed; leaf gradients accumulate into `.grad`.
 */
export function backward(root: Tensor, grad?: Tensor): void {
  const h = helpers;
  if (!h) throw new Error('backward: no op layer loaded (import src/tensor/ops)');
  if (!root.requiresGrad) throw new ShapeError('backward: the tensor does not require grad (no parameter reached it)');
  if (!grad && root.size !== 1) throw new ShapeError(`backward: root has shape ${fmt(root.shape)}; pass its gradient or reduce it to a scalar`);
  if (grad && !sameShape(grad.shape, root.shape)) throw new ShapeError(`backward: gradient ${fmt(grad.shape)} does not match root ${fmt(root.shape)}`);
  const order = topoOrder(root);
  const grads = new Map<Tensor, Tensor>();
  noGrad(() => {
    grads.set(root, grad ?? h.ones(root));
    for (const t of order) {
      const g = grads.get(t);
      if (!g) continue;
      if (!t.node) {
        accumulateLeaf(h, t, g, g === grad);
        grads.delete(t);
        continue;
      }
      const inGrads = t.node.backward(g);
      const inputs = t.node.inputs;
      for (let i = 0; i < inputs.length; i++) {
        const x = inputs[i];
        const gx = inGrads[i];
        if (!gx || !x.requiresGrad) {
          if (gx && gx !== g) gx.dispose();
          continue;
        }
        if (!sameShape(gx.shape, x.shape)) {
          throw new ShapeError(`backward of ${t.node.op}: gradient ${fmt(gx.shape)} for input ${i} of shape ${fmt(x.shape)}`);
        }
        // A leaf takes each gradient into .grad as it arrives: held in the map until the
        // leaf's turn, a tied embedding's [vocab, hidden] gradient from the LM head would
        // live through the whole backward, and a third copy at the sum with the
        // embedding's own.
        if (!x.node) {
          accumulateLeaf(h, x, gx, false);
          continue;
        }
        const prev = grads.get(x);
        if (prev) {
          grads.set(x, h.add(prev, gx));
          prev.dispose();
          if (gx !== g) gx.dispose();
        } else {
          grads.set(x, gx);
        }
      }
      if (g !== grad && !inGrads.includes(g)) g.dispose();
      grads.delete(t);
    }
  });
}

function accumulateLeaf(h: BackwardHelpers, leaf: Tensor, g: Tensor, external: boolean): void {
  if (leaf.grad) {
    h.addInPlace(leaf.grad, g);
    if (!external) g.dispose();
  } else if (external || g.storage.refs > 1) {
    // A shared buffer would make later in-place accumulation leak into other tensors.
    leaf.grad = keep(h.copy(g));
    if (!external) g.dispose();
  } else {
    leaf.grad = keep(g);
  }
}

/** Drops the gradients of `params`. */
export function zeroGrad(params: Iterable<Tensor>): void {
  for (const p of params) {
    p.grad?.dispose();
    p.grad = null;
  }
}
