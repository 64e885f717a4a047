// Command-line options shared by every command that touches the GPU.

import type { ArgsDef } from 'citty';
import type { Backend, GpuOptions } from '../gpu/device.ts';

export const gpuArgs = {
  backend: { type: 'string', description: 'GPU backend: auto, vulkan, metal, d3d12, opengl (env WEBGPU_BACKEND)' },
  adapter: { type: 'string', description: 'substring of the adapter name to use (env WEBGPU_ADAPTER)' },
  toggles: { type: 'string', description: 'Dawn toggles, comma-separated, e.g. allow_unsafe_apis,vulkan_enable_f16_on_nvidia (env WEBGPU_TOGGLES)' },
} as const satisfies ArgsDef;

export function gpuOptions(args: { backend?: string; adapter?: string; toggles?: string }): GpuOptions {
  const opts: GpuOptions = {};
  if (args.backend) opts.backend = args.backend as Backend;
  if (args.adapter) opts.adapter = args.adapter;
  if (args.toggles) opts.toggles = args.toggles.split(',').map((s) => s.trim()).filter(Boolean);
  return opts;
}
