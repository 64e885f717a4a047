// A small random Qwen model for the decode kernels' tests, with random biases and norm
// weights: randomModel leaves them 0 and 1, which would hide a bias or norm weight
// read from the wrong place.

import { randomModel } from '../../src/models/load.ts';
import { configFromPreset } from '../../src/hf_model/presets.ts';
import type { QwenModel } from '../../src/models/qwen.ts';
import { requireGrad } from '../../src/tensor/autograd.ts';
import { keep } from '../../src/tensor/scope.ts';
import { tensor } from '../../src/tensor/tensor.ts';
import { randn } from '../../src/util/random.ts';

/** Two layers of `preset` with a vocabulary of 97 and `overrides`, drawn from seed `s`. */
export function tinyQwen(preset: string, overrides: Record<string, unknown>, s: number): QwenModel {
  const model = randomModel(configFromPreset(preset, { vocab_size: 97, num_hidden_layers: 2, ...overrides }), s, { std: 0.2 });
  let k = 0;
  for (const [name, t] of [...model.params]) {
    if (!name.endsWith('.bias') && !name.endsWith('norm.weight')) continue;
    const data = randn(t.size, s * 31 + k++, name.endsWith('.bias') ? 0.3 : 0.2).map((x) => (name.endsWith('.bias') ? x : 1 + x));
    const fresh = keep(requireGrad(tensor(data, t.shape)));
    fresh.name = name;
    model.params.set(name, fresh);
    t.dispose();
  }
  return model;
}
