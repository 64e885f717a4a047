// One decoder layer's step through the tape, with the memory it keeps chosen by the
// pass: without gradients (rollout prefill and decoding, scoring, old, reference and
// teacher log-probs) a layer's intermediates are freed as soon as it has its output,
// so a forward holds one layer's worth whatever the depth; with gradients the layer
// keeps them for the backward, or, checkpointed, keeps only its input and output and
// runs its forward again inside the backward (about a third more arithmetic for a
// per-token footprint of one hidden vector per layer).

import { backward, isGradEnabled, noGrad, record, requireGrad, withGrad } from '../tensor/autograd.ts';
import { scope } from '../tensor/scope.ts';
import { TRAINING_FORWARD, withPolicy } from '../gpu/kernel_policy.ts';
import type { Tensor } from '../tensor/tensor.ts';

/**
 * y = layer(x). `params` lists the tensors the layer reads that may train (its weights
 * and LoRA factors; asked only when the layer is checkpointed): a checkpointed layer
 * hands their gradients to them directly.
 */
export function layerStep(x: Tensor, layer: (x: Tensor) => Tensor, params: () => readonly Tensor[], checkpoint: boolean): Tensor {
  if (!isGradEnabled()) {
    const y = scope(() => layer(x));
    // The previous layer's output has been read; nothing else holds it in a forward
    // without a tape. A decode layer may have added its blocks into it in place.
    if (y !== x) x.dispose();
    return y;
  }
  if (!checkpoint) return layer(x);
  const trained = params().filter((p) => p.requiresGrad);
  if (!x.requiresGrad && !trained.length) return layer(x);
  // Computed as the recompute will compute it, so the loss sees the output the gradients are of.
  const y = withPolicy(x.storage.rt.policy, TRAINING_FORWARD, () => noGrad(() => scope(() => layer(x))));
  return record(y, 'checkpoint', [x, ...trained], (gy) => scope(() => {
    // The recompute's input is a leaf over x's storage, so the inner backward leaves dx in its .grad.
    const leaf = requireGrad(x.view(x.shape), x.requiresGrad);
    const out = withGrad(() => layer(leaf));
    backward(out, gy);
    const dx = leaf.grad;
    leaf.grad = null;
    return [dx, ...trained.map(() => null)];
  }));
}

/** The parameters of layer `l` under `weightPrefix`, with the LoRA factors of its weights. */
export function layerParams(model: { config: { weightPrefix: string }; params: ReadonlyMap<string, Tensor>; lora: ReadonlyMap<string, { a: Tensor; b: Tensor }> }, l: number): Tensor[] {
  const prefix = `${model.config.weightPrefix}layers.${l}.`;
  const out: Tensor[] = [];
  for (const [name, t] of model.params) {
    if (!name.startsWith(prefix)) continue;
    out.push(t);
    const branch = model.lora.get(name);
    if (branch) out.push(branch.a, branch.b);
  }
  return out;
}
