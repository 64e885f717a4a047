// The Qwen3.5 forward+backward bench: its 2B shape is what transformers would build
// from Qwen3.5-2B's text config, and the small shape runs end to end on this GPU with
// finite throughput and the initial loss a random model must have.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { benchQwen35, qwen35BenchConfig } from '../src/bench/qwen35_step.ts';
import { expectedShapes } from '../src/hf_model/checkpoint.ts';
import type { ModelConfig } from '../src/hf_model/config.ts';
import { gpu } from './support/gpu.ts';

function paramCount(cfg: ModelConfig): number {
  let n = 0;
  for (const shape of expectedShapes(cfg).values()) n += shape.reduce((a, b) => a * b, 1);
  return n;
}

describe('qwen35 bench', () => {
  test('the 2b shape is Qwen3.5-2B\'s text model', () => {
    const cfg = qwen35BenchConfig('2b');
    assert.equal(cfg.layerTypes.map((l) => (l === 'linear_attention' ? 'L' : 'F')).join(''), 'LLLF'.repeat(6));
    assert.equal(cfg.rotaryDim, 64);
    assert.equal(cfg.tieEmbeddings, true);
    assert.deepEqual(cfg.linearAttention, { numKeyHeads: 16, numValueHeads: 16, keyHeadDim: 128, valueHeadDim: 128, convKernel: 4 });
    // 1.88B text parameters; the published 2.27B adds the vision tower.
    assert.equal(paramCount(cfg), 1_881_825_088);
  });

  test('unknown shapes are refused by name', () => {
    assert.throws(() => qwen35BenchConfig('9b'), /unknown qwen35 bench shape "9b" \(have 2b, small\)/);
  });

  test('the small shape runs forward + backward and reports finite throughput', async () => {
    const rt = await gpu();
    const [row] = (await benchQwen35(rt, 'small', { batch: 2, seq: 24, warmup: 1, iters: 2 })) as Record<string, unknown>[];
    assert.equal(row.bench, 'qwen35_fwd_bwd');
    assert.equal(row.layer_types, 'LF');
    assert.equal(row.tokens, 48);
    assert.equal(row.params, paramCount(qwen35BenchConfig('small')));
    for (const k of ['tokens_per_s', 'ms_per_step', 'peak_bytes', 'peak_held_bytes']) {
      const v = row[k] as number;
      assert.ok(Number.isFinite(v) && v > 0, `${k} = ${v}`);
    }
    assert.ok((row.peak_held_bytes as number) >= (row.peak_bytes as number));
    // Small random weights give near-uniform predictions: the loss starts at about ln V.
    assert.ok(Math.abs((row.loss_first as number) - Math.log(512)) < 0.5, `first loss ${row.loss_first}`);
  });
});
