// The naive kernel of the crash report on devices with f16 subgroup matrices (skipped
// elsewhere, with the reason): `bun test dev/`.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tensorMatmulMissing } from '../../src/kernels/matmul/tensor.ts';
import { gpu } from '../../tests/support/gpu.ts';
import { naiveSgmCase } from './naive_sgm.ts';

const rt = await gpu();
const missing = tensorMatmulMissing(rt);

test('the naive kernel (fragments straight from storage) matches f64 sums of its f16 operands', { skip: missing ?? false, timeout: 300_000 }, async () => {
  for (const [size, bands] of [[64, 1], [256, 3]]) {
    const r = await naiveSgmCase(rt, size, bands);
    assert.ok(r.ok, `${size} in ${bands} dispatches: relErr ${r.relErr}`);
  }
  await assert.rejects(naiveSgmCase(rt, 48, 1), /size 48 is not a positive multiple of 32/);
});
