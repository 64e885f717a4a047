import { defineCommand } from 'citty';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

export const gpuInfoCommand = defineCommand({
  meta: { name: 'gpu', description: 'Show the GPU adapter, its capabilities and limits' },
  args: { ...gpuArgs },
  async run({ args }) {
    const rt = await initRuntime(gpuOptions(args));
    const { gpu } = rt;
    const limits: Record<string, number> = {};
    for (const k of ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension']) {
      limits[k] = (gpu.limits as unknown as Record<string, number>)[k];
    }
    console.log(JSON.stringify({ runtime: gpu.runtime, adapter: gpu.description, caps: gpu.caps, limits }, null, 2));
    destroyRuntime();
  },
});
