// The dispatch bench: per-dispatch cost with the GPU's work, the host's recording share
// alone, and a round trip; recording must leave the runtime's submit interval as it was.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { benchDispatch } from '../src/bench/dispatch.ts';
import { gpu } from './support/gpu.ts';

describe('dispatch bench', () => {
  test('reports batched, recording-only and round-trip costs', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    const autoFlush = rt.autoFlush;
    const submits = rt.submitCount;
    const rows = (await benchDispatch(rt)) as { what: string; us: number }[];
    assert.deepEqual(rows.map((r) => r.what), ['per dispatch, batched', 'per dispatch, host recording only', 'submit and wait round trip']);
    for (const r of rows) assert.ok(Number.isFinite(r.us) && r.us > 0, `${r.what}: ${r.us} us`);
    assert.equal(rt.autoFlush, autoFlush);
    assert.ok(rt.submitCount > submits);
  });
});
