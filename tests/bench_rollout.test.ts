// The rollout bench and the engine usage it reads: a small household rollout of the
// bundled model on this GPU, whose counts must agree with each other.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { benchRollout } from '../src/bench/rollout.ts';
import { gpu } from './support/gpu.ts';

describe('rollout bench', () => {
  test('splits the wall time between engine and host and counts the decoding steps', { timeout: 600_000 }, async () => {
    const rt = await gpu();
    const rows = await benchRollout(rt, { tasks: 1, groupSize: 2, maxTurns: 2, maxResponseTokens: 24 });
    const r = rows[0] as Record<string, number>;
    assert.equal(r.episodes, 2);
    assert.ok(r.turns >= 2 && r.turns <= 4, `turns ${r.turns}`);
    assert.ok(r.engine_s > 0 && r.engine_s <= r.wall_s, `engine ${r.engine_s} of ${r.wall_s} s`);
    assert.ok(Math.abs(r.host_s - (r.wall_s - r.engine_s)) < 0.011);
    // One batch per round (both episodes fit one), each with at most 23 decoding steps.
    assert.equal(r.batches, r.engine_calls);
    assert.ok(r.decode_steps >= r.batches && r.decode_steps <= 23 * r.batches, `decode steps ${r.decode_steps} for ${r.batches} batches`);
    assert.ok(r.live_row_share > 0 && r.live_row_share <= 1, `live share ${r.live_row_share}`);
    // Every batch of more than one chunk records its second while its first runs.
    assert.ok(r.overlapped_chunk_share > 0 && r.overlapped_chunk_share < 1, `overlapped share ${r.overlapped_chunk_share}`);
    assert.ok(r.readback_wait_ms_per_decode_step >= 0);
    // The two episodes' first prompts are one: prefilled once, so less than all of the prompt tokens are.
    assert.ok(r.prefilled_prompt_share > 0.25 && r.prefilled_prompt_share < 1, `prefilled share ${r.prefilled_prompt_share}`);
    // A readback per chunk of decode steps: at most ceil(24 / stepsPerReadback) a batch, at least one.
    assert.ok(r.readbacks >= r.batches && r.readbacks <= r.batches * Math.ceil(24 / rt.policy.decode.stepsPerReadback), `${r.readbacks} readbacks for ${r.batches} batches`);
    assert.ok(r.dispatches_per_token > 0 && r.submits_per_token > 0);
    assert.ok(r.generated_tokens > 0 && r.generated_tokens <= 24 * r.turns);
    assert.equal(rows.length > 1, rt.caps.timestampQuery, 'a kernel profile only where timestamps exist');
  });
});
