// Shared test helpers: one runtime per test process, closeness checks, and a
// finite-difference gradient check that evaluates the loss in float64 on the CPU.

import assert from 'node:assert/strict';
import { applyPolicy, type KernelPolicyChanges } from '../../src/gpu/kernel_policy.ts';
import { initRuntime, type Runtime } from '../../src/gpu/runtime.ts';
import { randn } from '../../src/util/random.ts';
import { backward, noGrad, requireGrad } from '../../src/tensor/autograd.ts';
import { scopeAsync } from '../../src/tensor/scope.ts';
import { tensor, type Tensor } from '../../src/tensor/tensor.ts';
import '../../src/tensor/ops/index.ts';
import { mul, sum } from '../../src/tensor/ops/index.ts';

let rtPromise: Promise<Runtime> | null = null;

export function gpu(): Promise<Runtime> {
  rtPromise ??= initRuntime();
  return rtPromise;
}

/** Runs `body` with `changes` made to rt.policy, then puts back what they replaced. */
export async function withPolicy<T>(rt: Runtime, changes: KernelPolicyChanges, body: () => T | Promise<T>): Promise<T> {
  const undo = applyPolicy(rt.policy, changes);
  try {
    return await body();
  } finally {
    applyPolicy(rt.policy, undo);
  }
}

export function assertClose(
  actual: ArrayLike<number>, expected: ArrayLike<number>,
  opts: { atol?: number; rtol?: number; label?: string } = {},
): void {
  const { atol = 1e-5, rtol = 1e-4, label = 'values' } = opts;
  assert.equal(actual.length, expected.length, `${label}: length ${actual.length} != ${expected.length}`);
  let worst = -1;
  let worstErr = 0;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i];
    const e = expected[i];
    const err = Math.abs(a - e);
    const ok = err <= atol + rtol * Math.abs(e) || (Number.isNaN(a) && Number.isNaN(e)) || a === e;
    if (!ok && err / (atol + rtol * Math.abs(e)) > worstErr) {
      worstErr = err / (atol + rtol * Math.abs(e));
      worst = i;
    }
  }
  if (worst >= 0) {
    assert.fail(`${label}: element ${worst} is ${actual[worst]}, expected ${expected[worst]} (atol ${atol}, rtol ${rtol}; ${worstErr.toFixed(1)}x over)`);
  }
}

export async function read(t: Tensor): Promise<Float32Array> {
  return Float32Array.from(await t.toArray());
}

export interface GradCheckInput {
  data: Float32Array;
  shape: number[];
}

/**
 * Checks the gradients autograd computes for `f` against central differences.
 * The scalar loss is sum(f(x) * w) with fixed random w, evaluated in float64 on
 * the CPU from the GPU's output, so only f's own f32 rounding enters the estimate.
 * `probe` coordinates per input are checked.
 */
export async function gradCheck(
  f: (...xs: Tensor[]) => Tensor,
  inputs: GradCheckInput[],
  opts: { eps?: number; atol?: number; rtol?: number; probe?: number; label?: string; seed?: number } = {},
): Promise<void> {
  const { eps = 1e-2, atol = 2e-3, rtol = 2e-2, probe = 6, label = 'grad', seed = 7 } = opts;
  await scopeAsync(async () => {
    const xs = inputs.map((i) => requireGrad(tensor(i.data, i.shape)));
    const y = f(...xs);
    const w = randn(y.size, seed);
    const wt = tensor(w, y.shape);
    backward(sum(mul(y, wt)));
    const analytic = await Promise.all(xs.map((x) => (x.grad ? read(x.grad) : Promise.resolve(new Float32Array(x.size)))));
    const lossAt = async (k: number, data: Float32Array) =>
      scopeAsync(async () => {
        const args = inputs.map((inp, j) => tensor(j === k ? data : inp.data, inp.shape));
        const out = await read(noGrad(() => f(...args)));
        let s = 0;
        for (let i = 0; i < out.length; i++) s += out[i] * w[i];
        return s;
      });
    for (let k = 0; k < inputs.length; k++) {
      const n = inputs[k].data.length;
      const coords = new Set<number>();
      for (let c = 0; c < Math.min(probe, n); c++) coords.add(Math.floor(((c + 0.5) / Math.min(probe, n)) * n) % n);
      for (const c of coords) {
        const plus = Float32Array.from(inputs[k].data);
        const minus = Float32Array.from(inputs[k].data);
        plus[c] += eps;
        minus[c] -= eps;
        const numeric = ((await lossAt(k, plus)) - (await lossAt(k, minus))) / (plus[c] - minus[c]);
        const a = analytic[k][c];
        const err = Math.abs(a - numeric);
        assert.ok(err <= atol + rtol * Math.abs(numeric), `${label}: d/dx${k}[${c}] analytic ${a}, numeric ${numeric}`);
      }
    }
  });
}
