import { defineCommand } from 'citty';
import { benchDispatch } from '../bench/dispatch.ts';
import { destroyRuntime, initRuntime, type Runtime } from '../gpu/runtime.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

type Suite = (rt: Runtime, args: Record<string, unknown>) => Promise<object[]>;

const suites: Record<string, Suite> = {
  dispatch: (rt) => benchDispatch(rt),
};

export const benchCommand = defineCommand({
  meta: { name: 'bench', description: 'Benchmark kernels and steps on this GPU; prints JSON lines' },
  args: {
    ...gpuArgs,
    only: { type: 'string', description: `comma-separated suites (${Object.keys(suites).join(', ')})` },
  },
  async run({ args }) {
    const names = args.only ? args.only.split(',').map((s) => s.trim()) : Object.keys(suites);
    for (const n of names) if (!suites[n]) throw new Error(`bench: unknown suite "${n}" (have ${Object.keys(suites).join(', ')})`);
    const rt = await initRuntime(gpuOptions(args));
    console.log(JSON.stringify({ kind: 'device', adapter: rt.gpu.description, runtime: rt.gpu.runtime, caps: rt.gpu.caps }));
    for (const n of names) {
      for (const row of await suites[n](rt, args)) console.log(JSON.stringify(row));
    }
    destroyRuntime();
  },
});
