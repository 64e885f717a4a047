import { defineCommand } from 'citty';
import { exportModelSource } from '../checkpoint/export_model.ts';
import { resolveModelSource } from '../checkpoint/model_source.ts';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { dtypeArg } from './dtype_arg.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

export const exportCommand = defineCommand({
  meta: {
    name: 'export',
    description: 'Write a model, training checkpoint or run (its latest checkpoint) as a Hugging Face model directory, or a LoRA checkpoint as its PEFT adapter',
  },
  args: {
    model: { type: 'positional', description: 'model directory, training checkpoint (ckpt-N) or run directory', required: true },
    out: { type: 'string', description: 'directory to write (replaced whole)', required: true },
    dtype: { type: 'string', description: "weights' float type: bf16, f16 or f32 (default: as stored)" },
    merge: { type: 'boolean', description: 'LoRA: write the base model with the adapter folded in (uses the GPU) instead of the adapter' },
    ...gpuArgs,
  },
  async run({ args }) {
    const dtype = dtypeArg('--dtype', args.dtype);
    const source = resolveModelSource(args.model, 'MODEL', { tokenizer: 'optional' });
    const gpu = source.weights.kind === 'lora' && !!args.merge;
    if (gpu) await initRuntime(gpuOptions(args));
    try {
      const done = await exportModelSource(source, args.out, { dtype, merge: !!args.merge });
      const what = done.what === 'adapter' ? 'a PEFT LoRA adapter' : `${done.what === 'merged' ? 'the merged model' : 'a Hugging Face model'} in ${done.dtype!.toLowerCase()}`;
      console.log(`exported ${source.input}${source.checkpoint ? ` (${source.checkpoint})` : ''} to ${done.dir}: ${what}${source.tokenizerDir ? '' : ' (no tokenizer files: the source has none)'}`);
    } finally {
      if (gpu) destroyRuntime();
    }
  },
});
