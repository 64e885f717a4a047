// Which kernel a product runs on. Products of activations by weights (a Linear layer's
// forward, the LM head's logits) take the tensor-core kernel (tensor.ts:
// operands rounded to f16, f32 accumulation) when the device has f16 subgroup
// matrices and the product is large enough to gain from it. So do gradient products (a
// gradient as A: a layer's dX and dW), unless the policy keeps them on the f32 kernels
// (--tensor-cores forward): a gradient's elements are often far below f16's smallest
// normal (6e-5) and would lose their precision or vanish, so each gradient is first
// scaled by a power of two that puts its largest element just under 2^14
// (grad_scale.ts), as mixed-precision training scales its loss, but per tensor and
// exactly undone in the product's epilogue. On the H200 that took the Qwen2.5-0.5B
// training step from 620 to 478 ms (docs/RESULTS.md). Masters, optimizer state,
// softmax and every reduction stay f32 either way.

import type { Runtime } from '../../gpu/runtime.ts';
import { gradScale } from '../grad_scale.ts';
import type { MatmulArgs } from './args.ts';
import { matmul } from './matmul.ts';
import { matmulSplitKWhereItApplies } from './split_k.ts';
import { matmulTensor, tensorMatmulAvailable, tensorMatmulMissing } from './tensor.ts';

/**
 * A line for the run's log when a hardware adapter cannot take tensor cores that the
 * policy would use (why, and on NVIDIA which toggles unlock them); null otherwise. The
 * software GPU never has them, so it gets no line.
 */
export function tensorCoreNote(rt: Runtime): string | null {
  if (rt.caps.compatibility || !rt.policy.tensorCores.enabled) return null;
  const missing = tensorMatmulMissing(rt);
  return missing ? `tensor cores: not used; ${missing}` : null;
}

/** Whether `args` (a forward product) would run on the tensor-core kernel on this device. */
export function usesTensorCores(rt: Runtime, args: MatmulArgs): boolean {
  return args.tile === undefined && (args.act ?? 'none') === 'none' && !args.residual && shapeTakesTensorCores(rt, args);
}

/** Whether a plain forward product of this shape (no epilogue, no forced tile) would run on the tensor-core kernel. */
export function shapeTakesTensorCores(rt: Runtime, shape: { m: number; n: number; k: number; batch?: number }): boolean {
  const p = rt.policy.tensorCores;
  const rows = shape.m > p.maxSkinnyRows || (shape.n > rt.policy.matmul.narrowMaxColumns && shape.m >= p.wideMinRows);
  return p.enabled && rows && shape.m * shape.n * shape.k * (shape.batch ?? 1) >= p.minMacs && tensorMatmulAvailable(rt);
}

/** A product of activations by weights: on tensor cores when usesTensorCores says so, else matmul(). */
export function forwardMatmul(rt: Runtime, args: MatmulArgs): void {
  if (usesTensorCores(rt, args)) onTensorCores(rt, args);
  else matmul(rt, args);
}

/** `args` on the tensor-core kernel, which has none of the f32 kernels' epilogues or tiles. */
function onTensorCores(rt: Runtime, args: MatmulArgs, scaleA?: GPUBuffer): void {
  const { act: _act, residual: _residual, tile: _tile, ...rest } = args;
  matmulTensor(rt, { ...rest, scaleA });
}

/** Whether a gradient product (A the gradient) would run on the tensor-core kernel. */
export function gradientUsesTensorCores(rt: Runtime, args: MatmulArgs): boolean {
  return rt.policy.tensorCores.gradients && usesTensorCores(rt, args);
}

/**
 * Records `products`, in order, each with the gradient `grad` (its first `n` f32
 * values) as A. Those that take tensor cores share one scale of the gradient; the
 * others run on the f32 kernels unchanged. Weight gradients too small an output for
 * the GPU are cut along k (split_k.ts) on either kernel: here for the tensor
 * cores, inside matmul() for the f32 kernel.
 */
export function gradientMatmuls(rt: Runtime, grad: GPUBuffer, n: number, products: readonly MatmulArgs[]): void {
  if (products.some((args) => args.a !== grad)) throw new Error('gradientMatmuls: every product must take the gradient as A');
  const tensor = products.map((args) => gradientUsesTensorCores(rt, args));
  let work: GPUBuffer | null = null;
  let scale: GPUBuffer | null = null;
  if (tensor.some(Boolean)) {
    work = rt.pool.acquire(8);
    scale = rt.pool.acquire(8);
    gradScale(rt, grad, n, work, scale);
  }
  products.forEach((args, i) => {
    if (tensor[i]) matmulSplitKWhereItApplies(rt, args, (a) => onTensorCores(rt, a, scale!));
    else matmul(rt, args);
  });
  if (work) rt.pool.release(work);
  if (scale) rt.pool.release(scale);
}
