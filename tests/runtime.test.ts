// The GPU layer and tensor core: errors that say what and where, pipelines reused
// across sizes, scopes freeing what they made, autograd bookkeeping.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { acquireGpu, gpuOptionsFromEnv, robustnessToggles } from '../src/device/device.ts';
import { gpuOptions } from '../src/cli/gpu_args.ts';
import { GpuError } from '../src/device/errors.ts';
import { sizeClass } from '../src/gpu/buffer_pool.ts';
import * as ew from '../src/kernels/elementwise.ts';
import { uniforms } from '../src/kernels/launch.ts';
import { backward, noGrad, requireGrad } from '../src/tensor/autograd.ts';
import { DisposedError } from '../src/tensor/errors.ts';
import * as F from '../src/tensor/ops/index.ts';
import { keep, scope, scopeAsync } from '../src/tensor/scope.ts';
import { tensor, zeros } from '../src/tensor/tensor.ts';
import { gpu, read } from './support/gpu.ts';

describe('gpu runtime', () => {
  test('a validation error becomes an exception naming the kernel', async () => {
    const rt = await gpu();
    const x = rt.pool.acquire(64);
    const k = rt.kernel('elementwise', 'unary', { OP: 0 });
    // One binding where the kernel needs two.
    rt.dispatch(k, [x], new Uint32Array(64), [1]);
    await assert.rejects(rt.sync(), (e: Error) => e instanceof GpuError && /elementwise\.unary<OP=0>/.test(e.message));
    rt.pool.release(x);
    await rt.sync();
  });

  test('a read reports the errors of the work before it, a later submission waits for the next sync', async () => {
    const rt = await gpu();
    const x = rt.pool.acquire(64);
    const k = rt.kernel('elementwise', 'unary', { OP: 0 });
    rt.dispatch(k, [x], new Uint32Array(64), [1]);
    await assert.rejects(rt.read(x, 0, 16), (e: Error) => e instanceof GpuError && /elementwise\.unary<OP=0>/.test(e.message));
    const reading = rt.read(x, 0, 16);
    rt.dispatch(k, [x], new Uint32Array(64), [1]);
    rt.flush();
    assert.equal((await reading).byteLength, 16);
    await assert.rejects(rt.sync(), (e: Error) => e instanceof GpuError && /elementwise\.unary<OP=0>/.test(e.message));
    rt.pool.release(x);
    await rt.sync();
  });

  test('a shader that does not compile names its family and entry point', async () => {
    const rt = await gpu();
    assert.throws(() => rt.kernel('no_such_family', 'main'), /no shader file .*no_such_family\.wgsl/);
    rt.kernel('elementwise', 'no_such_entry');
    await assert.rejects(rt.sync(), /elementwise\.no_such_entry/);
  });

  test('new sizes reuse the compiled pipeline', async () => {
    const rt = await gpu();
    const k1 = rt.kernel('elementwise', 'unary', { OP: 1 });
    for (const n of [3, 300, 3000]) {
      await scopeAsync(async () => {
        const y = F.exp(tensor(new Float32Array(n).fill(0), [n]));
        assert.equal((await read(y))[n - 1], 1);
      });
    }
    assert.equal(rt.kernel('elementwise', 'unary', { OP: 1 }), k1);
  });

  test('after the GPU runs dry, submits start small and double up to autoFlush', async () => {
    const rt = await gpu();
    const y = rt.pool.acquire(64);
    await rt.sync();
    // Dispatch counts at which each submit goes out: 4, then 8, 16, 32 and 64 more.
    const submitsAfter = (dispatches: number) => {
      const at: number[] = [];
      for (let i = 1; i <= dispatches; i++) {
        const before = rt.submitCount;
        ew.fill(rt, y, 16, i);
        if (rt.submitCount > before) at.push(i);
      }
      return at;
    };
    assert.deepEqual(submitsAfter(200), [4, 12, 28, 60, 124, 188]);
    await rt.sync();
    assert.deepEqual(submitsAfter(12), [4, 12]);
    // A readback the GPU ends on starts the ramp over; one with later work in flight does not.
    await rt.read(y, 0, 4);
    assert.deepEqual(submitsAfter(4), [4]);
    const reading = rt.read(y, 0, 4);
    submitsAfter(8);
    rt.flush();
    await reading;
    assert.deepEqual(submitsAfter(32), [32]);
    await rt.sync();
    assert.equal(new Float32Array(await rt.read(y, 0, 4))[0], 32);
    rt.pool.release(y);
  });

  test('a repeated dispatch reuses its bind group and still reads its new parameters and data', async () => {
    const rt = await gpu();
    await rt.sync();
    rt.releaseCached();
    const dev = rt.device as GPUDevice & { createBindGroup: GPUDevice['createBindGroup'] };
    const create = dev.createBindGroup;
    let made = 0;
    dev.createBindGroup = function (this: GPUDevice, d: GPUBindGroupDescriptor) {
      made++;
      return create.call(this, d);
    };
    try {
      const counts: number[] = [];
      for (let i = 0; i < 6; i++) {
        const y = await scopeAsync(async () => read(F.addScalar(tensor(Float32Array.of(i, 2 * i), [2]), 10 * i)));
        assert.deepEqual([...y], [11 * i, 12 * i]);
        counts.push(made);
      }
      // The pool hands the same buffers back and the uniform arena the same slot, so the
      // groups made settle after the first steps instead of growing with every step.
      assert.equal(counts[5], counts[3], `bind groups made after each step: ${counts.join(', ')}`);
      // Other buffers make other groups.
      await scopeAsync(async () => {
        const held = tensor(Float32Array.of(5, 6), [2]);
        const y = await read(F.addScalar(tensor(Float32Array.of(7, 8), [2]), 1));
        assert.deepEqual([...y], [8, 9]);
        assert.deepEqual([...(await read(held))], [5, 6]);
      });
      assert.ok(made > counts[5]);
    } finally {
      dev.createBindGroup = create;
    }
  });

  test('bind groups tell ranges of one buffer apart, and a range from the whole buffer', async () => {
    const rt = await gpu();
    await rt.sync();
    const x = rt.pool.acquire(1024);
    const y = rt.pool.acquire(1024);
    try {
      rt.upload(x, 0, Float32Array.from({ length: 256 }, (_, i) => i + 1));
      const neg = rt.kernel('elementwise', 'unary', { OP: ew.UNARY_OPS.neg });
      const p = uniforms(32);
      p.u[0] = 4;
      const made = rt.bindGroupCount;
      const firsts: number[] = [];
      // Each dispatch follows a readback, so each takes the uniform arena's first slot
      // and only the bindings tell them apart.
      for (const src of [x, { buffer: x, offset: 256, size: 16 }, { buffer: x, offset: 512, size: 16 }, { buffer: x }, x]) {
        rt.dispatch(neg, [src, y], p.u, [1]);
        firsts.push(new Float32Array(await rt.read(y, 0, 4))[0]);
      }
      assert.deepEqual(firsts, [-1, -65, -129, -1, -1]);
      // The whole buffer, two ranges and the range of it all; the last dispatch reuses the first's group.
      assert.equal(rt.bindGroupCount - made, 4);
    } finally {
      rt.pool.release(x);
      rt.pool.release(y);
    }
  });

  test('uploads recorded between submits land in order, past one arena chunk and beside a large one; readbacks reuse their buffers', async () => {
    const rt = await gpu();
    await rt.sync();
    await scopeAsync(async () => {
      // 40 uploads of 2 KiB (80 KiB: two arena chunks) and one of 96 KiB (its own staging
      // buffer), each after a dispatch that wrote the same buffer, so only in-order
      // copies leave the uploaded values.
      const n = 512;
      const sevens = tensor(new Float32Array(24 * 1024).fill(7));
      const targets = Array.from({ length: 40 }, () => zeros([n]));
      const big = zeros([24 * 1024]);
      targets.forEach((t, i) => {
        ew.unary(rt, 'neg', sevens.buffer, t.buffer, n);
        rt.upload(t.buffer, 0, Float32Array.from({ length: n }, (_, j) => i * 1000 + j));
      });
      ew.unary(rt, 'neg', sevens.buffer, big.buffer, 24 * 1024);
      rt.upload(big.buffer, 0, Float32Array.from({ length: 24 * 1024 }, (_, j) => -j));
      for (const [i, t] of [[0, targets[0]], [17, targets[17]], [39, targets[39]]] as const) {
        const got = await read(t);
        assert.equal(got[0], i * 1000);
        assert.equal(got[n - 1], i * 1000 + n - 1);
      }
      const b = await read(big);
      assert.equal(b[24 * 1024 - 1], -(24 * 1024 - 1));
      // Two reads in flight at once, then one after: each gets its own values.
      const [x, y] = await Promise.all([read(targets[1]), read(targets[2])]);
      assert.equal(x[5], 1005);
      assert.equal(y[5], 2005);
      assert.equal((await read(targets[3]))[5], 3005);
    });
  });

  test('grids past 65535 workgroups fold into two dimensions', async () => {
    await gpu();
    const n = 65536 * 256 + 77;
    await scopeAsync(async () => {
      const y = await read(F.addScalar(zeros([n]), 2));
      assert.equal(y[0], 2);
      assert.equal(y[n - 1], 2);
    });
  });

  test('bad backend settings and impossible adapters say what was tried', async () => {
    assert.throws(() => gpuOptionsFromEnv({ WEBGPU_BACKEND: 'cuda' }), /WEBGPU_BACKEND=cuda is not one of/);
    await assert.rejects(acquireGpu({ adapter: 'no-such-adapter-xyz' }), /no WebGPU adapter found matching "no-such-adapter-xyz"/);
  });

  test('robustness: clamps off on hardware by default, kept on the software GPU, overridable', async () => {
    const f16 = ['allow_unsafe_apis', 'vulkan_enable_f16_on_nvidia'];
    assert.deepEqual(robustnessToggles(f16, 'auto', false), [...f16, 'disable_robustness']);
    assert.deepEqual(robustnessToggles(f16, 'auto', true), f16);
    assert.deepEqual(robustnessToggles(['disable_robustness'], 'auto', true), ['disable_robustness']);
    assert.deepEqual(robustnessToggles(['disable_robustness', 'x'], 'on', false), ['x']);
    assert.deepEqual(robustnessToggles([], 'off', true), ['disable_robustness']);
    assert.equal(gpuOptionsFromEnv({ WEBGPU_ROBUSTNESS: 'on' }).robustness, 'on');
    assert.throws(() => gpuOptionsFromEnv({ WEBGPU_ROBUSTNESS: 'maybe' }), /WEBGPU_ROBUSTNESS=maybe is not one of auto, on, off/);
    assert.equal(gpuOptions({ robustness: 'off' }).robustness, 'off');
    assert.throws(() => gpuOptions({ robustness: 'none' }), /--robustness must be auto, on or off, got "none"/);
    const rt = await gpu();
    // What the device under test got by default: clamps kept on the software GPU, dropped on hardware through Dawn.
    if (process.env.WEBGPU_ROBUSTNESS === undefined && !process.env.WEBGPU_TOGGLES?.includes('disable_robustness')) {
      assert.equal(rt.caps.robustness, rt.caps.compatibility || rt.gpu.runtime === 'deno');
    }
  });

  test('size classes waste under a quarter', () => {
    for (const n of [1, 255, 257, 1000, 4097, 1 << 20, (1 << 20) + 1]) {
      const c = sizeClass(n);
      assert.ok(c >= n && (c <= 256 || c < n * 1.25 + 1), `${n} -> ${c}`);
    }
  });

  test('a class past the binding limit shrinks to the request, so the buffer stays bindable', () => {
    const embedding = 248320 * 2048 * 4;
    assert.equal(sizeClass(embedding), 2 ** 31);
    assert.equal(sizeClass(embedding, 2147483644), embedding);
    assert.equal(sizeClass(1000, 2147483644), 1024);
  });
});

describe('tensors and scopes', () => {
  test('use after dispose names the tensor', async () => {
    await gpu();
    const t = tensor([1, 2, 3], [3]);
    t.name = 'weights';
    t.dispose();
    assert.throws(() => F.exp(t), (e: Error) => e instanceof DisposedError && /"weights" \[3\] f32 used after dispose/.test(e.message));
  });

  test('a scope frees everything but its result; keep() survives', async () => {
    const rt = await gpu();
    await rt.sync();
    const before = rt.pool.stats.inUse;
    let kept = null as ReturnType<typeof tensor> | null;
    const out = scope(() => {
      const a = tensor([1, 2, 3, 4], [4]);
      const b = F.mul(a, a);
      kept = keep(F.exp(b));
      return F.sum(b);
    });
    assert.equal(await out.item(), 30);
    out.dispose();
    kept!.dispose();
    assert.equal(rt.pool.stats.inUse, before);
  });

  test('gradients accumulate across backward calls until zeroed', async () => {
    await gpu();
    const w = requireGrad(keep(tensor([1, 2, 3], [3])));
    for (let i = 0; i < 3; i++) scope(() => backward(F.sum(F.mul(w, w))));
    assert.deepEqual([...(await read(w.grad!))], [6, 12, 18]);
    noGrad(() => scope(() => assert.equal(F.sum(F.mul(w, w)).requiresGrad, false)));
    w.dispose();
  });

  test('ops refuse mismatched shapes and dtypes before dispatching', async () => {
    await gpu();
    scope(() => {
      assert.throws(() => F.matmul(tensor(new Float32Array(6), [2, 3]), tensor(new Float32Array(8), [4, 2])), /matmul: \[2, 3\] @ \[4, 2\]/);
      assert.throws(() => F.reshape(tensor(new Float32Array(6), [2, 3]), [4, 2]), /cannot reshape \[2, 3\] \(6 elements\) to \[4, 2\]/);
      assert.throws(() => F.softmax(tensor(new Int32Array(4), [4])), /softmax.*i32/);
      assert.throws(() => tensor([1, 2, 3], [2, 2]), /3 values do not fill shape \[2, 2\]/);
    });
  });
});
