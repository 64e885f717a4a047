import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { defineCommand } from 'citty';
import { exportModelSource } from '../checkpoint/export_model.ts';
import { checkExportTarget, EXPORT_RECORD, recordExport } from '../checkpoint/export_target.ts';
import { resolveModelSource } from '../checkpoint/model_source.ts';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { hubModelDir } from '../hub/hub_model.ts';
import { pushDirectory, pushTarget } from '../hub/hub_push.ts';
import { CliError } from './args.ts';
import { dtypeArg } from './dtype_arg.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

export const exportCommand = defineCommand({
  meta: {
    name: 'export',
    description: 'Write a model, training checkpoint or run (its latest checkpoint) as a Hugging Face model directory, or a LoRA checkpoint as its PEFT adapter; --push uploads it to the Hub',
  },
  args: {
    model: { type: 'positional', description: 'model directory, training checkpoint (ckpt-N), run directory or Hub model id', required: true },
    out: { type: 'string', description: 'directory to write: a new or empty one, or an earlier export (replaced whole); may be left out with --push' },
    overwrite: { type: 'boolean', description: 'replace an --out directory that holds files an export did not write (never the model exported, a directory above it, or the working directory)' },
    push: { type: 'string', description: 'Hub repository (owner/name) to upload the export to, created if missing (token: HF_TOKEN, else `hf auth login`\'s)' },
    dtype: { type: 'string', description: "weights' float type: bf16, f16 or f32 (default: as stored)" },
    merge: { type: 'boolean', description: 'LoRA: write the base model with the adapter folded in (uses the GPU) instead of the adapter' },
    ...gpuArgs,
  },
  async run({ args }) {
    const dtype = dtypeArg('--dtype', args.dtype);
    if (!args.out && !args.push) throw new CliError('export: --out DIR, --push owner/name, or both');
    // The push is checked (repository id, token) before anything is written.
    const target = args.push === undefined ? null : pushTarget(args.push);
    const source = resolveModelSource(await hubModelDir(args.model), 'MODEL', { tokenizer: 'optional' });
    if (args.out) {
      try {
        checkExportTarget(source, args.out, { overwrite: !!args.overwrite });
      } catch (e) {
        throw new CliError((e as Error).message);
      }
    }
    const gpu = source.weights.kind === 'lora' && !!args.merge;
    const scratch = args.out ? null : fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-export-'));
    const out = args.out ?? path.join(scratch!, 'model');
    if (gpu) await initRuntime(gpuOptions(args));
    try {
      const done = await exportModelSource(source, out, { dtype, merge: !!args.merge });
      if (args.out) recordExport(out, source, done.what);
      const what = done.what === 'adapter' ? 'a PEFT LoRA adapter' : `${done.what === 'merged' ? 'the merged model' : 'a Hugging Face model'} in ${done.dtype!.toLowerCase()}`;
      console.log(`exported ${source.input}${source.checkpoint ? ` (${source.checkpoint})` : ''}${scratch ? '' : ` to ${done.dir}`}: ${what}${source.tokenizerDir ? '' : ' (no tokenizer files: the source has none)'}`);
      if (target) console.log(`pushed to ${target.endpoint}/${target.repo}: ${await pushDirectory(out, target, { leaveOut: [EXPORT_RECORD] })}`);
    } finally {
      if (gpu) destroyRuntime();
      if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    }
  },
});
