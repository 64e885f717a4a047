// Command-line options shared by every command that touches the GPU.

import type { ArgsDef } from 'citty';
import { type Backend, isRobustness } from '../device/device.ts';
import type { DecodePolicy, KernelPolicyChanges } from '../gpu/kernel_policy.ts';
import type { RuntimeOptions } from '../gpu/runtime.ts';

export const gpuArgs = {
  backend: { type: 'string', description: 'GPU backend: auto, vulkan, metal, d3d12, opengl (env WEBGPU_BACKEND)' },
  adapter: { type: 'string', description: 'substring of the adapter name to use (env WEBGPU_ADAPTER)' },
  toggles: { type: 'string', description: 'Dawn toggles, comma-separated, e.g. allow_unsafe_apis,vulkan_enable_f16_on_nvidia (env WEBGPU_TOGGLES)' },
  robustness: {
    type: 'string',
    description: 'auto (default): Dawn\'s bounds clamps in shaders off on hardware adapters (every kernel checks its own bounds; the clamps halve tensor-core matmul speed on the H200), on for the software GPU; on: keep them (debugging a kernel); off: drop them everywhere (env WEBGPU_ROBUSTNESS)',
  },
  'tensor-cores': {
    type: 'string',
    description: 'auto (default): large forward and gradient products on f16 tensor cores when the adapter offers them (each gradient scaled by a power of two first); forward: forward products only; off: f32 kernels only',
  },
  'matmul-tiles': {
    type: 'string',
    description: 'rules (default): the f32 matmul tile chosen by rules measured on the H200; autotune: every tile that fits is timed once per product shape on this GPU (at its first sync or readback) and the fastest kept',
  },
  'gpu-memory': { type: 'string', description: 'GPU memory budget in GiB (train: gpu.memory; default 4): batch widths and checkpointing are sized to it, and the buffer pool holds no more' },
  attention: {
    type: 'string',
    description: 'auto (default): uniform-buffer kernels on the software GPU, elsewhere blocked where its tiles fit workgroup memory, else tiled; blocked: flash attention with a block of scores and outputs per invocation (head dim 64, or 128 with 64 KiB of workgroup memory); tiled: one score and one output element per invocation; uniform: the software GPU\'s kernels',
  },
  'attention-tensor': {
    type: 'string',
    description: 'on (default): large forwards that record no gradient (scoring, teacher and reference log-probs, prefill; not the old log-probs) run attention on f16 tensor cores where the adapter offers them (kernels/attention_tensor.ts); off: the --attention path everywhere',
  },
  'shared-prefixes': {
    type: 'string',
    description: 'on (default): the old, reference and teacher log-probs and the update run a beginning several sequences share once where that costs less (a GRPO group\'s prompt, skill cards); off: every sequence whole',
  },
  'decode-fused': { type: 'string', description: 'fused Qwen decode layers: auto (default: where the skinny kernels run, real GPUs), never, always (models/qwen_decode.ts)' },
  'decode-weights': { type: 'string', description: 'what fused decode steps read: f16 (default) copies of the weights packed before each generation, or the f32 weights' },
  'decode-steps': { type: 'string', description: 'decode steps between readbacks (default 4): sampling and stop checks stay on the GPU in between' },
  policy: {
    type: 'string',
    description: 'kernel-policy fields as section.field=value, comma-separated (src/gpu/kernel_policy.ts), e.g. decode.tensorMinRows=33,decode.stepsPerReadback=8; applied last',
  },
} as const satisfies ArgsDef;

/**
 * --policy's section.field=value pairs as policy changes. Values are read as JSON where
 * they parse (numbers, booleans, arrays) and as strings otherwise; kernelPolicy checks
 * each field and its type against the defaults.
 */
export function policyChanges(text: string): KernelPolicyChanges {
  const changes: Record<string, Record<string, unknown>> = {};
  for (const item of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^(\w+)\.(\w+)=(.+)$/.exec(item);
    if (!m) throw new Error(`--policy: "${item}" is not section.field=value`);
    let value: unknown;
    try {
      value = JSON.parse(m[3]);
    } catch {
      value = m[3];
    }
    (changes[m[1]] ??= {})[m[2]] = value;
  }
  return changes as KernelPolicyChanges;
}

/** --gpu-memory in bytes, or undefined when not given. */
export function gpuMemoryBytes(args: { 'gpu-memory'?: string }): number | undefined {
  const v = args['gpu-memory'];
  if (v === undefined) return undefined;
  const gib = Number(v);
  if (!(gib > 0 && Number.isFinite(gib))) throw new Error(`--gpu-memory must be a positive number of GiB, got "${v}"`);
  return gib * 2 ** 30;
}

/** The decode section of the kernel policy from --decode-fused, --decode-weights and --decode-steps (only what they set). */
function decodePolicy(args: { 'decode-fused'?: string; 'decode-weights'?: string; 'decode-steps'?: string }): Partial<DecodePolicy> {
  const out: Partial<DecodePolicy> = {};
  const fused = args['decode-fused'];
  if (fused !== undefined) {
    if (fused !== 'auto' && fused !== 'never' && fused !== 'always') throw new Error(`--decode-fused must be auto, never or always, got "${fused}"`);
    out.fused = fused;
  }
  const weights = args['decode-weights'];
  if (weights !== undefined) {
    if (weights !== 'f16' && weights !== 'f32') throw new Error(`--decode-weights must be f16 or f32, got "${weights}"`);
    out.weights = weights;
  }
  const steps = args['decode-steps'];
  if (steps !== undefined) {
    const n = Number(steps);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--decode-steps must be a positive integer, got "${steps}"`);
    out.stepsPerReadback = n;
  }
  return out;
}

/** The adapter these arguments ask for (--robustness included) and the kernel policy's changes (--tensor-cores, --matmul-tiles, --attention, --attention-tensor, --shared-prefixes, --decode-*). */
export function gpuOptions(args: {
  backend?: string; adapter?: string; toggles?: string; robustness?: string; 'tensor-cores'?: string; 'matmul-tiles'?: string; attention?: string;
  'attention-tensor'?: string; 'shared-prefixes'?: string; 'decode-fused'?: string; 'decode-weights'?: string; 'decode-steps'?: string; policy?: string;
}): RuntimeOptions {
  const mode = args['tensor-cores'] ?? 'auto';
  if (mode !== 'auto' && mode !== 'forward' && mode !== 'off') throw new Error(`--tensor-cores must be auto, forward or off, got "${mode}"`);
  const tiles = args['matmul-tiles'] ?? 'rules';
  if (tiles !== 'rules' && tiles !== 'autotune') throw new Error(`--matmul-tiles must be rules or autotune, got "${tiles}"`);
  const attention = args.attention ?? 'auto';
  if (attention !== 'auto' && attention !== 'tiled' && attention !== 'blocked' && attention !== 'uniform') {
    throw new Error(`--attention must be auto, tiled, blocked or uniform, got "${attention}"`);
  }
  const attentionTensor = args['attention-tensor'];
  if (attentionTensor !== undefined && attentionTensor !== 'on' && attentionTensor !== 'off') throw new Error(`--attention-tensor must be on or off, got "${attentionTensor}"`);
  const shared = args['shared-prefixes'];
  if (shared !== undefined && shared !== 'on' && shared !== 'off') throw new Error(`--shared-prefixes must be on or off, got "${shared}"`);
  const robustness = args.robustness;
  if (robustness !== undefined && !isRobustness(robustness)) throw new Error(`--robustness must be auto, on or off, got "${robustness}"`);
  const opts: RuntimeOptions = {
    policy: { attention: { path: attention, ...(attentionTensor && { tensorForward: attentionTensor === 'on' }) }, tensorCores: { enabled: mode !== 'off', gradients: mode === 'auto' }, matmul: { tiles }, decode: decodePolicy(args),
      ...(shared && { scoring: { sharePrefixes: shared === 'on' } }),
    },
  };
  if (args.policy) {
    const given = opts.policy as Record<string, object>;
    for (const [section, fields] of Object.entries(policyChanges(args.policy))) given[section] = { ...given[section], ...fields };
  }
  if (args.backend) opts.backend = args.backend as Backend;
  if (args.adapter) opts.adapter = args.adapter;
  if (robustness) opts.robustness = robustness;
  if (args.toggles) opts.toggles = args.toggles.split(',').map((s) => s.trim()).filter(Boolean);
  return opts;
}
