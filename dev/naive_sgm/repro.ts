// Reproduction of the crash docs/PERFORMANCE.md records: a naive f16 subgroup-matrix matmul
// (dev/naive_sgm/matmul_naive_sgm.wgsl: 32x32 per subgroup, fragments loaded straight from
// storage, no workgroup memory) gave correct results at 256 and 1024 and brought the
// process down at 2048. Each case (size, Dawn robustness on or off, the grid in one
// dispatch or in bands of block rows) runs in a child process of its own with a time
// limit, so a crash becomes a row naming the phase it reached (init, compile,
// first-dispatch, check, timing) and the child's stderr; the sweep goes on.
//
//   npm run build && node dist/dev/naive_sgm/repro.js [--sizes 256,1024,2048] [--bands 1,8] [--robustness on,off]
// With WEBGPU_TOGGLES=allow_unsafe_apis,vulkan_enable_f16_on_nvidia on NVIDIA.
//
// Rows: {"kind":"naive-sgm", size, robustness, bands, ms, tflops, relErr (sampled
// outputs against f64 dot products of the f16 operands, over sum |a b|), ok}; for a case
// that failed in JavaScript (no adapter, a validation error), {..., error, code, phase};
// for a child that died, {crashed: true, ..., code, signal, phase, stderr}.

import { fileURLToPath } from 'node:url';
import { childToggles, crashRow, lastPhase, phase, runChild } from '../child_case.ts';
import { naiveSgmCase } from './naive_sgm.ts';
import { isRobustness, type Robustness } from '../../src/device/device.ts';
import { initRuntime } from '../../src/gpu/runtime.ts';
import { tensorMatmulMissing } from '../../src/kernels/matmul/tensor.ts';

interface Case {
  size: number;
  robustness: Robustness;
  /** Dispatches the grid's block rows are spread over. */
  bands: number;
}

async function runCase(c: Case): Promise<object> {
  phase('init');
  const rt = await initRuntime({ toggles: childToggles, requireHardware: true, robustness: c.robustness });
  const base = { kind: 'naive-sgm', size: c.size, robustness: rt.caps.robustness ? 'on' : 'off', bands: c.bands, adapter: rt.gpu.description };
  const missing = tensorMatmulMissing(rt);
  if (missing) return { ...base, skipped: missing };
  return { ...base, ...(await naiveSgmCase(rt, c.size, c.bands, phase)) };
}

function option(args: string[], name: string, fallback: string): string[] {
  const at = args.indexOf(name);
  return (at >= 0 ? args[at + 1] : fallback).split(',').map((s) => s.trim()).filter(Boolean);
}

const args = process.argv.slice(2);
if (args.includes('--case')) {
  try {
    console.log(JSON.stringify(await runCase(JSON.parse(args[args.indexOf('--case') + 1]) as Case)));
    process.exit(0);
  } catch (e) {
    console.log(JSON.stringify({ kind: 'naive-sgm', error: `${(e as Error).name}: ${(e as Error).message}` }));
    process.exit(1);
  }
} else {
  const sizes = option(args, '--sizes', '256,512,1024,2048,4096').map(Number);
  for (const s of sizes) if (!(Number.isInteger(s) && s >= 32 && s % 32 === 0)) throw new Error(`--sizes: ${s} is not a positive multiple of 32`);
  const bands = option(args, '--bands', '1').map(Number);
  const robustness = option(args, '--robustness', 'on,off').map((r) => {
    if (!isRobustness(r)) throw new Error(`--robustness: ${r} is not on, off or auto`);
    return r;
  });
  const timeoutS = Number(option(args, '--timeout', '60')[0]);
  for (const size of sizes) {
    for (const r of robustness) {
      for (const band of bands) {
        const c: Case = { size, robustness: r, bands: band };
        const res = await runChild(fileURLToPath(import.meta.url), ['--case', JSON.stringify(c)], timeoutS);
        if (res.row && res.code === 0) console.log(JSON.stringify(res.row));
        // A JavaScript-level failure (no adapter, a validation error) is a row of its own, not a crash.
        else if (res.row && 'error' in res.row) console.log(JSON.stringify({ ...c, ...res.row, code: res.code, phase: lastPhase(res) }));
        else console.log(JSON.stringify(crashRow('naive-sgm', c, res)));
      }
    }
  }
}
