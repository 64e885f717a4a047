import { defineCommand } from 'citty';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { tensorCoreNote } from '../kernels/matmul/precision.ts';
import { applySoftwareGpuScale, EMBEDDED_RECIPE } from '../trainer/default_run.ts';
import { describeConfig, loadConfig } from '../trainer/config.ts';
import { checkRunInputs, train } from '../trainer/train.ts';
import { configWords, intArg, numberArg } from './args.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

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
    // Everything about the configuration is checked before the GPU is touched.
    let cfg = loadConfig(file, file ? overrides : [...EMBEDDED_RECIPE, ...overrides]);
    checkRunInputs(cfg);
    const stopAfter = args['stop-after'] === undefined ? undefined : intArg('--stop-after', args['stop-after'], 1);
    const timeLimitSeconds = args['time-limit'] === undefined ? undefined : numberArg('--time-limit', args['time-limit'], 0) * 60;
    const rt = await initRuntime(gpuOptions(args));
    console.log(`GPU: ${rt.gpu.description} (${rt.gpu.runtime})`);
    const note = tensorCoreNote(rt);
    if (note) console.log(note);
    if (rt.caps.compatibility && !args['full-size']) {
      const scaled = applySoftwareGpuScale(cfg, overrides);
      if (scaled.changes.length) {
        console.log(`software GPU: scaled the run down to finish in minutes (${scaled.changes.join(', ')}); pass --full-size to run it as configured`);
        cfg = scaled.config;
      }
    }
    console.log(describeConfig(cfg));
    await train(cfg, { resume: args.resume, overwrite: args.overwrite, stopAfter, timeLimitSeconds });
    destroyRuntime();
  },
});
