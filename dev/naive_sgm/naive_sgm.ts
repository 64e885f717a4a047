// The naive subgroup-matrix matmul (matmul_naive_sgm.wgsl beside this file) on one size:
// its time and its distance from f64 dot products of the f16 operands. repro.ts runs it
// size by size in child processes (the crash docs/PERFORMANCE.md records); naive_sgm.test.ts
// checks it on devices with f16 subgroup matrices. Research only: the shader is not in
// shaders/, so this module compiles it itself.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pattern, PERIOD } from '../../src/bench/matmul.ts';
import { timeGpu } from '../../src/bench/timing.ts';
import type { Kernel, Runtime } from '../../src/gpu/runtime.ts';
import { uniforms } from '../../src/kernels/launch.ts';
import { f16ToF32, f32ToF16 } from '../../src/util/half.ts';

const SHADER = join('dev', 'naive_sgm', 'matmul_naive_sgm.wgsl');

/** The shader's source, found by walking up from this module (src/ under Bun, dist/ under Node). */
function shaderText(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++, dir = dirname(dir)) {
    if (existsSync(join(dir, SHADER))) return readFileSync(join(dir, SHADER), 'utf8');
  }
  throw new Error(`cannot find ${SHADER} above ${fileURLToPath(import.meta.url)}`);
}

function naiveKernel(rt: Runtime): Kernel {
  const module = rt.device.createShaderModule({ code: shaderText(), label: 'matmul_naive_sgm' });
  const pipeline = rt.device.createComputePipeline({ label: 'matmul_naive_sgm.main', layout: 'auto', compute: { module, entryPoint: 'main' } });
  return { name: 'matmul_naive_sgm.main', pipeline, layout: pipeline.getBindGroupLayout(0) };
}

export interface NaiveSgmResult {
  ms: number;
  tflops: number;
  /** Largest |C - exact| / sum |a b| over sampled outputs. */
  relErr: number;
  ok: boolean;
}

/** An f16 matrix of `elements` repeating `p` (rounded to f16), on the GPU and as f32 values of one period. */
function f16Matrix(rt: Runtime, elements: number, p: Float32Array): { buf: GPUBuffer; values: Float32Array } {
  const block = f32ToF16(p);
  const bits = new Uint16Array(elements);
  for (let i = 0; i < elements; i++) bits[i] = block[i % PERIOD];
  const buf = rt.pool.acquire(elements * 2, 'naive sgm operand');
  rt.upload(buf, 0, bits);
  return { buf, values: f16ToF32(block) };
}

/**
 * C = A @ B at size x size x size (a multiple of 32) with the grid's block rows spread
 * over `bands` dispatches. `phase` hears each stage as it starts.
 */
export async function naiveSgmCase(rt: Runtime, size: number, bands: number, phase: (name: string) => void = () => {}): Promise<NaiveSgmResult> {
  if (!(Number.isInteger(size) && size >= 32 && size % 32 === 0)) throw new Error(`naiveSgmCase: size ${size} is not a positive multiple of 32`);
  const n = size;
  const a = f16Matrix(rt, n * n, pattern(1));
  const b = f16Matrix(rt, n * n, pattern(2));
  const out = rt.pool.acquire(n * n * 4, 'naive sgm C');
  try {
    phase('compile');
    const kernel = naiveKernel(rt);
    const blockRows = n / 32;
    const perBand = Math.ceil(blockRows / bands);
    const record = () => {
      for (let first = 0; first < blockRows; first += perBand) {
        const p = uniforms(4);
        p.u.set([n, n, n, first]);
        rt.dispatch(kernel, [a.buf, b.buf, out], p.u, [n / 32, Math.min(perBand, blockRows - first), 1]);
      }
    };
    record();
    phase('first-dispatch');
    await rt.sync();
    phase('check');
    let relErr = 0;
    for (const i of [0, n - 1, 7, Math.floor(n / 3)]) {
      const row = new Float32Array(await rt.read(out, i * n * 4, n * 4));
      for (const j of [0, n - 1, 5, Math.floor(n / 2)]) {
        let exact = 0;
        let mag = 0;
        for (let q = 0; q < n; q++) {
          const x = a.values[(i * n + q) % PERIOD] * b.values[(q * n + j) % PERIOD];
          exact += x;
          mag += Math.abs(x);
        }
        relErr = Math.max(relErr, Math.abs(row[j] - exact) / Math.max(mag, 1e-30));
      }
    }
    phase('timing');
    const ms = await timeGpu(rt, record, { warmup: 1, iters: 5 });
    return { ms: +ms.toFixed(4), tflops: +((2 * n ** 3) / (ms * 1e9)).toPrecision(4), relErr, ok: relErr < 1e-5 };
  } finally {
    for (const buf of [a.buf, b.buf, out]) rt.pool.release(buf);
  }
}
