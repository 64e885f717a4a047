// A linear projection in PyTorch's layout (weight [out, in]) with an optional LoRA
// branch: y = x W^T + b + (alpha / r) * (x A^T) B^T. The base weight can stay frozen
// (requiresGrad false) while A and B train.

import { loraLinear } from '../tensor/ops/lora_linear.ts';
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
  return lora ? loraLinear(x, weight, bias ?? undefined, lora.a, lora.b, lora.scaling) : linear(x, weight, bias ?? undefined);
}
