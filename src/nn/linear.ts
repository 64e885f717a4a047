// A linear projection in PyTorch's layout (weight [out, in]) with an optional LoRA
// branch: y = x W^T + b + (alpha / r) * (x A^T) B^T. The base weight can stay frozen
// (requiresGrad false) while A and B train.

import { add, scale } from '../tensor/ops/elementwise.ts';
import { linear } from '../tensor/ops/matmul.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface LoraBranch {
  /** [r, in] */
  a: Tensor;
  /** [out, r] */
  b: Tensor;
  /** alpha / r */
  scaling: number;
}

export function project(x: Tensor, weight: Tensor, bias?: Tensor | null, lora?: LoraBranch | null): Tensor {
  const y = linear(x, weight, bias ?? undefined);
  if (!lora) return y;
  const down = linear(x, lora.a);
  const up = linear(down, lora.b);
  const scaled = scale(up, lora.scaling);
  return add(y, scaled);
}
