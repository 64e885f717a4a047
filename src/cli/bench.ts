import { defineCommand } from 'citty';
import { benchDispatch } from '../bench/dispatch.ts';
import { benchGenerate } from '../bench/generate.ts';
import { benchAttention, benchLoss } from '../bench/kernels.ts';
import { benchMatmul } from '../bench/matmul.ts';
import { benchTrainStep } from '../bench/train_step.ts';
import { destroyRuntime, initRuntime, type Runtime } from '../gpu/runtime.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

type Suite = (rt: Runtime, args: Record<string, unknown>) => Promise<object[]>;

const presetOf = (args: Record<string, unknown>) => (args.preset as string | undefined) ?? 'qwen05b';

const suites: Record<string, Suite> = {
  dispatch: (rt) => benchDispatch(rt),
  matmul: (rt) => benchMatmul(rt),
  attention: (rt) => benchAttention(rt),
  loss: (rt) => benchLoss(rt),
  train: (rt, args) => benchTrainStep(rt, presetOf(args), { batch: Number(args.batch), seq: Number(args.seq) }),
  generate: (rt, args) => benchGenerate(rt, presetOf(args)),
};

export const benchCommand = defineCommand({
  meta: { name: 'bench', description: 'Benchmark kernels and steps on this GPU; prints JSON lines' },
  args: {
    ...gpuArgs,
    only: { type: 'string', description: `comma-separated suites (${Object.keys(suites).join(', ')})` },
    batch: { type: 'string', description: 'train suite batch size (default 8)', default: '8' },
    seq: { type: 'string', description: 'train suite sequence length (default 512)', default: '512' },
    preset: { type: 'string', description: 'model shapes for train/generate: qwen05b (Qwen2.5-0.5B) or small (12.6M)', default: 'qwen05b' },
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
