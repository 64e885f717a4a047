import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AdamW } from '../src/optim/adamw.ts';
import { clipGradNorm, globalGradNorm } from '../src/optim/clip.ts';
import { lrAt } from '../src/optim/schedule.ts';
import { adamwStep, globalNorm } from '../src/reference/adamw.ts';
import { randn } from '../src/util/random.ts';
import { requireGrad, zeroGrad } from '../src/tensor/autograd.ts';
import { keep } from '../src/tensor/scope.ts';
import { numel } from '../src/tensor/shape.ts';
import { tensor, type Tensor } from '../src/tensor/tensor.ts';
import { assertClose, gpu, read } from './support/gpu.ts';

const shapes = [[37], [5, 13], [1]];

function makeParams(seed: number, names = true): Tensor[] {
  return shapes.map((s, i) => {
    const p = keep(requireGrad(tensor(randn(numel(s), seed + i), s)));
    if (names) p.name = `layer.${i}.weight`;
    return p;
  });
}

function setGrads(params: Tensor[], grads: (Float32Array | null)[]): void {
  zeroGrad(params);
  params.forEach((p, i) => {
    const g = grads[i];
    if (g) p.grad = keep(tensor(g, p.shape));
  });
}

function disposeAll(params: Tensor[], opt?: AdamW): void {
  for (const p of params) p.dispose();
  opt?.dispose();
}

describe('AdamW', () => {
  test('several steps match the PyTorch AdamW formula on the CPU', async () => {
    await gpu();
    const params = makeParams(1);
    const hyper = { lr: 1e-2, betas: [0.9, 0.95] as const, eps: 1e-8, weightDecay: 0.1 };
    const opt = new AdamW(params, hyper);
    const cpu = params.map((p) => ({ p: new Float64Array(0), m: new Float64Array(p.size), v: new Float64Array(p.size) }));
    for (let i = 0; i < params.length; i++) cpu[i].p = Float64Array.from(await read(params[i]));
    // Step 3 overrides the learning rate, step 4 scales the gradients; the last
    // parameter gets no gradient at step 2 and must be left alone then.
    const plan = [
      { lr: undefined, scale: 1 }, { lr: undefined, scale: 1 }, { lr: 3e-3, scale: 1 }, { lr: undefined, scale: 0.25 }, { lr: undefined, scale: 1 },
    ];
    for (let s = 0; s < plan.length; s++) {
      const grads = params.map((p, i) => (s === 1 && i === 2 ? null : randn(p.size, 100 + 10 * s + i, 0.5 + i)));
      setGrads(params, grads);
      opt.step(plan[s].lr, plan[s].scale);
      params.forEach((p, i) => {
        const g = grads[i];
        if (g) {
          adamwStep(cpu[i].p, g, cpu[i].m, cpu[i].v, {
            lr: plan[s].lr ?? hyper.lr, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: s + 1, gradScale: plan[s].scale,
          });
        }
      });
    }
    assert.equal(opt.stepCount, 5);
    for (let i = 0; i < params.length; i++) {
      assertClose(await read(params[i]), cpu[i].p, { atol: 1e-7, rtol: 1e-6, label: `param ${i}` });
      assertClose(await read(opt.m[i]), cpu[i].m, { atol: 1e-7, rtol: 2e-6, label: `exp_avg ${i}` });
      assertClose(await read(opt.v[i]), cpu[i].v, { atol: 1e-8, rtol: 2e-6, label: `exp_avg_sq ${i}` });
    }
    disposeAll(params, opt);
  });

  test('state dict round-trips and training continues identically', async () => {
    await gpu();
    const a = makeParams(2);
    const b = makeParams(2);
    const optA = new AdamW(a, { lr: 5e-3 });
    const optB = new AdamW(b, { lr: 5e-3 });
    for (let s = 0; s < 3; s++) {
      setGrads(a, a.map((p, i) => randn(p.size, 30 + s * 7 + i)));
      optA.step();
    }
    for (let i = 0; i < a.length; i++) b[i].storage.rt.upload(b[i].buffer, 0, await read(a[i]));
    const state = await optA.stateDict();
    assert.deepEqual(Object.keys(state).sort(), ['layer.0.weight.exp_avg', 'layer.0.weight.exp_avg_sq', 'layer.1.weight.exp_avg', 'layer.1.weight.exp_avg_sq', 'layer.2.weight.exp_avg', 'layer.2.weight.exp_avg_sq', 'step']);
    assert.deepEqual([...state.step], [3]);
    optB.loadStateDict(state);
    assert.equal(optB.stepCount, 3);
    const g = a.map((p, i) => randn(p.size, 90 + i));
    setGrads(a, g);
    setGrads(b, g);
    optA.step();
    optB.step();
    for (let i = 0; i < a.length; i++) assert.deepEqual(await read(b[i]), await read(a[i]), `param ${i} after resuming`);
    disposeAll(a, optA);
    disposeAll(b, optB);
  });

  test('loadStateDict refuses missing, extra and mis-sized entries before changing anything', async () => {
    await gpu();
    const params = makeParams(3);
    const opt = new AdamW(params, { lr: 1e-3 });
    const good = await opt.stateDict();
    const { ['layer.1.weight.exp_avg']: _dropped, ...missing } = good;
    assert.throws(() => opt.loadStateDict(missing), /AdamW.loadStateDict: missing "layer.1.weight.exp_avg"/);
    assert.throws(() => opt.loadStateDict({ ...good, 'layer.9.weight.exp_avg': new Float32Array(1) }), /unexpected "layer.9.weight.exp_avg"/);
    assert.throws(
      () => opt.loadStateDict({ ...good, step: Float32Array.of(7), 'layer.1.weight.exp_avg_sq': new Float32Array(64) }),
      /AdamW.loadStateDict: "layer.1.weight.exp_avg_sq" has 64 values, parameter \[5, 13\] has 65/,
    );
    assert.equal(opt.stepCount, 0, 'a refused load changes nothing');
    assert.throws(() => opt.loadStateDict({ ...good, step: Float32Array.of(1.5) }), /"step" must hold one non-negative integer/);
    disposeAll(params, opt);
  });

  test('unnamed parameters get positional keys; bad parameters and hyperparameters are refused', async () => {
    await gpu();
    const params = makeParams(4, false);
    const opt = new AdamW(params, { lr: 1e-3 });
    assert.ok('param.1.exp_avg' in (await opt.stateDict()));
    assert.throws(() => new AdamW([params[0], params[0]], { lr: 1e-3 }), /AdamW: parameter #1 is listed twice/);
    assert.throws(() => new AdamW(params, { lr: -1 }), /AdamW: lr must be finite and >= 0, got -1/);
    assert.throws(() => new AdamW(params, { lr: 1e-3, betas: [0.9, 1] }), /AdamW: betas must lie in \[0, 1\)/);
    const frozen = keep(tensor(new Float32Array(3), [3]));
    assert.throws(() => new AdamW([frozen], { lr: 1e-3 }), /AdamW: parameter #0 \[3\] does not require grad/);
    params[1].grad = keep(tensor(new Float32Array(5), [5]));
    assert.throws(() => opt.step(), /AdamW.step: gradient \[5\] does not match parameter #1 \[5, 13\]/);
    assert.equal(opt.stepCount, 0);
    frozen.dispose();
    disposeAll(params, opt);
  });
});

describe('gradient norm and clipping', () => {
  // 10000 spans three 4096-element chunks, 4096 exactly one.
  const sizes = [10000, 37, 4096, 1];

  function gradParams(seed: number): { params: Tensor[]; grads: Float32Array[] } {
    const grads = sizes.map((n, i) => randn(n, seed + i, 0.1));
    const params = sizes.map((n, i) => {
      const p = keep(requireGrad(tensor(new Float32Array(n), [n])));
      p.grad = keep(tensor(grads[i], [n]));
      return p;
    });
    return { params, grads };
  }

  test('the global norm matches the CPU', async () => {
    await gpu();
    const { params, grads } = gradParams(5);
    const norm = await globalGradNorm(params);
    const want = globalNorm(grads);
    assert.ok(Math.abs(norm - want) <= 1e-5 * want, `norm ${norm}, expected ${want}`);
    const gradless = keep(requireGrad(tensor(new Float32Array(2), [2])));
    assert.equal(await globalGradNorm([gradless]), 0, 'no gradients: norm 0');
    disposeAll([...params, gradless]);
  });

  test('clipping scales down only above maxNorm', async () => {
    await gpu();
    const { params, grads } = gradParams(6);
    const norm = globalNorm(grads);
    const clipped = await clipGradNorm(params, norm / 4);
    assert.ok(clipped.finite);
    assert.ok(Math.abs(clipped.scale - 0.25) < 1e-5, `scale ${clipped.scale}`);
    assert.ok(Math.abs(clipped.norm * clipped.scale - norm / 4) <= 1e-5 * norm);
    const loose = await clipGradNorm(params, norm * 2);
    assert.equal(loose.scale, 1);
    await assert.rejects(() => clipGradNorm(params, 0), /clipGradNorm: maxNorm must be > 0/);
    disposeAll(params);
  });

  test('a NaN or infinite gradient makes the norm non-finite', async () => {
    await gpu();
    for (const bad of [NaN, Infinity, -Infinity]) {
      const { params, grads } = gradParams(7);
      grads[0][5000] = bad;
      params[0].grad!.storage.rt.upload(params[0].grad!.buffer, 0, grads[0]);
      const r = await clipGradNorm(params, 1);
      assert.equal(r.finite, false, `gradient holding ${bad}`);
      assert.equal(r.scale, 0);
      disposeAll(params);
    }
  });
});

describe('lrAt', () => {
  test('warmup, then constant, cosine or linear decay', () => {
    const base = 1e-3;
    assert.equal(lrAt(0, { base }), base);
    // verl's warmup factor step / W: iteration i (step i - 1) trains at (i - 1) / W.
    assert.equal(lrAt(0, { base, warmupSteps: 4 }), 0);
    assert.equal(lrAt(1, { base, warmupSteps: 4 }), base / 4);
    assert.equal(lrAt(3, { base, warmupSteps: 4 }), (3 * base) / 4);
    assert.equal(lrAt(4, { base, warmupSteps: 4 }), base);
    assert.equal(lrAt(100, { base, warmupSteps: 4 }), base);
    const cos = { base, warmupSteps: 2, kind: 'cosine' as const, totalSteps: 12, minLr: 1e-4 };
    // Cosine warms up from minLr as verl's min_lr_ratio + (1 - min_lr_ratio) * step / W.
    assert.equal(lrAt(0, cos), 1e-4);
    assert.ok(Math.abs(lrAt(1, cos) - 5.5e-4) < 1e-15);
    assert.equal(lrAt(2, cos), base);
    assert.ok(Math.abs(lrAt(7, cos) - (1e-4 + 0.9e-3 / 2)) < 1e-15);
    assert.equal(lrAt(12, cos), 1e-4);
    assert.equal(lrAt(50, cos), 1e-4);
    const lin = { base, kind: 'linear' as const, totalSteps: 10 };
    assert.equal(lrAt(0, lin), base);
    assert.ok(Math.abs(lrAt(4, lin) - 0.6e-3) < 1e-15);
    assert.equal(lrAt(10, lin), 0);
    assert.throws(() => lrAt(1, { base, kind: 'cosine' }), /lrAt: a cosine schedule needs an integer totalSteps > warmupSteps \(0\), got undefined/);
    assert.throws(() => lrAt(-1, { base }), /lrAt: step must be an integer >= 0/);
  });
});
