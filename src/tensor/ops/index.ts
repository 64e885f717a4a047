// The differentiable op set. Importing this module also hands autograd the kernels it
// needs for accumulation.

import { registerBackwardHelpers } from '../autograd.ts';
import { add, axpyInPlace } from './elementwise.ts';
import { clone, onesLike } from './create.ts';

export * from './create.ts';
export * from './elementwise.ts';
export * from './reduce.ts';
export * from './shape_ops.ts';
export * from './matmul.ts';
export * from './lora_linear.ts';
export * from './attention.ts';
export * from './rope.ts';
export * from './softmax.ts';
export * from './logprob.ts';
export * from './embedding.ts';
export * from './rmsnorm.ts';
export * from './swiglu.ts';
export * from './sampling.ts';

registerBackwardHelpers({
  ones: onesLike,
  add,
  addInPlace: (dst, src) => axpyInPlace(dst, src, 1),
  copy: (t) => clone(t),
});
