import * as path from 'node:path';
import { defineCommand } from 'citty';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { tensorCoreNote } from '../kernels/matmul/precision.ts';
import { findLatestCheckpoint } from '../checkpoint/checkpoint.ts';
import { applySoftwareGpuScale, EMBEDDED_RECIPE, writeScaleRecord, type ScaleRecord } from '../config/default_run.ts';
import { describeConfig, loadConfig, runDir, type TrainConfig } from '../config/config.ts';
import { assertNewRun } from '../report/metrics.ts';
import { checkEnvironment } from '../eval/environment.ts';
import { checkRunInputs, firstRunConfig, train } from '../trainer/train.ts';
import { CliError, configWords, intArg, numberArg } from './args.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

/** What train() would refuse about the run directory once the GPU is up and the model loaded, refused before. */
function checkRunDirectory(cfg: TrainConfig, resume: boolean, overwrite: boolean): void {
  const first = firstRunConfig(cfg);
  const chained = first !== cfg;
  const dir = runDir(first);
  // A staged method's --resume may find its first stage done or not begun.
  if (!resume) assertNewRun(dir, { overwrite });
  else if (!chained && !findLatestCheckpoint(path.join(dir, 'checkpoints'))) throw new CliError(`--resume: no checkpoint under ${path.join(dir, 'checkpoints')}`);
}

export const trainCommand = defineCommand({
  meta: {
    name: 'train',
    description: 'Train an agent (GRPO). `train` alone runs the embedded default: the bundled model on the household environment. ' +
      'Overrides are key=value words after the config, e.g. `train examples/grpo_household.yaml optim.lr=2e-5 rollout.groupSize=4`.',
  },
  args: {
    ...gpuArgs,
    config: { type: 'positional', required: false, description: 'YAML or JSON config file, then any number of key=value overrides' },
    method: { type: 'string', description: 'shortcut for method=NAME' },
    iterations: { type: 'string', description: 'shortcut for iterations=N' },
    resume: { type: 'boolean', description: 'continue the run in its output directory from its latest checkpoint' },
    'stop-after': { type: 'string', description: 'stop after N iterations of this invocation (continue later with --resume)' },
    'time-limit': { type: 'string', description: 'stop, with a checkpoint, before an iteration that would end after M minutes (continue later with --resume)' },
    overwrite: { type: 'boolean', description: 'replace an existing run of the same name instead of refusing' },
    'full-size': { type: 'boolean', description: 'on a software GPU, run the configuration as given instead of scaling it down' },
  },
  async run({ args }) {
    const { file, overrides } = configWords('train', args._ as string[]);
    if (args.method) overrides.push(`method=${args.method}`);
    if (args.iterations) overrides.push(`iterations=${args.iterations}`);
    if (args['gpu-memory'] !== undefined) overrides.push(`gpu.memory=${args['gpu-memory']}`);
    // Everything about the configuration and the run directory is checked before the GPU is touched.
    let cfg = loadConfig(file, file ? overrides : [...EMBEDDED_RECIPE, ...overrides]);
    checkRunInputs(cfg);
    checkRunDirectory(cfg, !!args.resume, !!args.overwrite);
    await checkEnvironment(cfg);
    const stopAfter = args['stop-after'] === undefined ? undefined : intArg('--stop-after', args['stop-after'], 1);
    const timeLimitSeconds = args['time-limit'] === undefined ? undefined : numberArg('--time-limit', args['time-limit'], 0) * 60;
    const rt = await initRuntime(gpuOptions(args));
    console.log(`GPU: ${rt.gpu.description} (${rt.gpu.runtime})`);
    const note = tensorCoreNote(rt);
    if (note) console.log(note);
    let scale: ScaleRecord | null = null;
    if (rt.caps.software && !args['full-size']) {
      const scaled = applySoftwareGpuScale(cfg, overrides);
      if (scaled.changes.length) {
        console.log(`software GPU: scaled the run down to finish in minutes (${scaled.changes.join(', ')}); pass --full-size to run it as configured`);
        cfg = scaled.config;
        scale = { adapter: rt.gpu.description, changes: scaled.changes };
      }
    }
    // A run replaced at full size loses the old record; a resumed one keeps its own.
    if (scale || !args.resume) writeScaleRecord(runDir(cfg), scale);
    console.log(describeConfig(cfg));
    await train(cfg, { resume: args.resume, overwrite: args.overwrite, stopAfter, timeLimitSeconds });
    destroyRuntime();
  },
});
