// Which kernel a forward product runs on. Products of activations by weights (a
// Linear layer's forward, the LM head's logits) take the tensor-core kernel
// (matmul_tensor.ts: operands rounded to f16, f32 accumulation) when the device has
// f16 subgroup matrices and the product is large enough to gain from it. Gradient
// products stay on the f32 kernels: a gradient's elements are often far below f16's
// smallest normal (6e-5) and would lose their precision or vanish, which mixed-
// precision training otherwise answers with loss scaling. Masters, optimizer state,
// softmax and every reduction stay f32 either way.

import type { Runtime } from '../gpu/runtime.ts';
import * as mk from './matmul.ts';
import { matmulTensor, tensorMatmulAvailable } from './matmul_tensor.ts';

/** The choices benchmarks vary. */
export const tensorCorePolicy = {
  /** Route forward products to tensor cores when the device has them. */
  enabled: true,
  /** Smallest product (m * n * k * batch multiply-adds) worth the tensor-core kernel. */
  minMacs: 2 ** 30,
  /** Row counts up to this take the f32 skinny path (decode steps) whatever the size. */
  maxSkinnyRows: 64,
};

/** Whether `args` (a forward product) would run on the tensor-core kernel on this device. */
export function usesTensorCores(rt: Runtime, args: mk.MatmulArgs): boolean {
  const p = tensorCorePolicy;
  return p.enabled && args.tile === undefined && (args.act ?? 'none') === 'none' && !args.residual && args.m > p.maxSkinnyRows &&
    args.m * args.n * args.k * (args.batch ?? 1) >= p.minMacs && tensorMatmulAvailable(rt);
}

/** A product of activations by weights: on tensor cores when usesTensorCores says so, else mk.matmul. */
export function forwardMatmul(rt: Runtime, args: mk.MatmulArgs): void {
  if (!usesTensorCores(rt, args)) {
    mk.matmul(rt, args);
    return;
  }
  const { act: _act, residual: _residual, tile: _tile, ...rest } = args;
  matmulTensor(rt, rest);
}
