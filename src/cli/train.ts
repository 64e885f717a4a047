import * as fs from 'node:fs';
import * as path from 'node:path';
import { defineCommand } from 'citty';
import { methodDefinition } from '../algos/methods/index.ts';
import { checkpointIteration } from '../checkpoint/checkpoint.ts';
import { REPORT_FILE, RUN_CONFIG_FILE } from '../report/run_files.ts';
import { runSummary } from '../report/run_summary.ts';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { tensorCoreNote } from '../kernels/matmul/precision.ts';
import { applySoftwareGpuScale, EMBEDDED_RECIPE, type ScaleRecord } from '../config/default_run.ts';
import { configWarnings, loadConfig, METHODS, overrideWithoutSecrets, runDir, type TrainConfig } from '../config/config.ts';
import { assertRunUnlocked } from '../run/run_lock.ts';
import { planRunStart } from '../run/run_start.ts';
import { checkEnvironment } from '../envs/environment.ts';
import { hubModelDir } from '../hub/hub_model.ts';
import { checkRunInputs, firstRunConfig, train } from '../trainer/train.ts';
import { CliError, configWords, intArg, numberArg } from './args.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

/**
 * What train() would refuse about the run directory once the GPU is up and the model
 * loaded, refused before; the newest checkpoint when `--resume` finds the run already
 * complete (RL runs, whose iterations the config gives; SFT counts its steps from its data).
 */
function checkRunDirectory(cfg: TrainConfig, resume: boolean, resumeFrom: string | undefined, overwrite: boolean): string | null {
  const first = firstRunConfig(cfg);
  const chained = first !== cfg;
  const dir = runDir(first);
  if (chained && resumeFrom) throw new CliError(`--resume ${resumeFrom}: ${cfg.method} runs in stages, each a run of its own; resume one stage's run by its name (output.runName) with its method`);
  assertRunUnlocked(dir);
  // A staged method's --resume may find its first stage done or not begun.
  if (resume && chained) return null;
  const start = planRunStart(dir, { resume, resumeFrom, overwrite });
  const complete = start.kind === 'resume' && !resumeFrom && methodDefinition(cfg.method).loop === 'rl' && checkpointIteration(start.checkpoint) >= cfg.iterations;
  return complete ? start.checkpoint : null;
}

const CHECKPOINT_NAME = /^ckpt-\d+$/;

/** The checkpoint `--resume ckpt-N` (or `--resume=ckpt-N`) names, taken out of the positional words. */
function resumeTarget(rawArgs: readonly string[], words: string[]): { resume: boolean; from: string | undefined; words: string[] } {
  const inline = rawArgs.find((w) => w.startsWith('--resume='))?.slice('--resume='.length);
  if (inline !== undefined && !CHECKPOINT_NAME.test(inline)) throw new CliError(`--resume=${inline}: expected a checkpoint name, ckpt-N`);
  const named = words.filter((w) => CHECKPOINT_NAME.test(w));
  const resume = rawArgs.some((w) => w === '--resume' || w.startsWith('--resume='));
  const from = [...(inline ? [inline] : []), ...named];
  if (from.length && !resume) throw new CliError(`${from[0]}: a checkpoint name goes after --resume (\`--resume ${from[0]}\`)`);
  if (from.length > 1) throw new CliError(`--resume: one checkpoint expected, got ${from.join(', ')}`);
  return { resume, from: from[0], words: words.filter((w) => !CHECKPOINT_NAME.test(w)) };
}

export const trainCommand = defineCommand({
  meta: {
    name: 'train',
    description: `Train an agent with any method (${METHODS.join(', ')}; --method or method=NAME, default grpo). \`train\` alone runs the embedded default: GRPO with the bundled model on the household environment. ` +
      'Overrides are key=value words after the config, e.g. `train examples/grpo_household.yaml optim.lr=2e-5 rollout.groupSize=4`.',
  },
  args: {
    config: { type: 'positional', required: false, description: 'YAML or JSON config file, then any number of key=value overrides' },
    method: { type: 'string', description: 'shortcut for method=NAME' },
    iterations: { type: 'string', description: 'shortcut for iterations=N' },
    resume: { type: 'boolean', description: 'continue the run from its newest intact checkpoint, or from the one named after it (--resume ckpt-N)' },
    'stop-after': { type: 'string', description: 'stop after N iterations of this invocation (continue later with --resume)' },
    'time-limit': { type: 'string', description: 'stop, with a checkpoint, before an iteration that would end after M minutes (continue later with --resume)' },
    overwrite: { type: 'boolean', description: 'replace an existing run of the same name instead of refusing' },
    'full-size': { type: 'boolean', description: 'on a software GPU, run the configuration as given instead of scaling it down' },
    ...gpuArgs,
  },
  async run({ args, rawArgs }) {
    const target = resumeTarget(rawArgs, args._ as string[]);
    const { file, overrides } = configWords('train', target.words);
    if (args.method) overrides.push(`method=${args.method}`);
    if (args.iterations) overrides.push(`iterations=${args.iterations}`);
    if (args['gpu-memory'] !== undefined) overrides.push(`gpu.memory=${args['gpu-memory']}`);
    // Everything about the configuration and the run directory is checked before the GPU is touched.
    let cfg = loadConfig(file, file ? overrides : [...EMBEDDED_RECIPE, ...overrides]);
    // A Hub id trains from its snapshot in the Hugging Face cache (downloaded once), which the run records.
    const modelDir = await hubModelDir(cfg.model.path);
    if (modelDir !== cfg.model.path) cfg = { ...cfg, model: { ...cfg.model, path: modelDir } };
    checkRunInputs(cfg);
    if (checkRunDirectory(cfg, target.resume, target.from, !!args.overwrite)) {
      const dir = runDir(cfg);
      const report = path.join(dir, REPORT_FILE);
      for (const line of runSummary({ dir, reached: cfg.iterations, total: cfg.iterations, thisCommand: null, report: fs.existsSync(report) ? report : null })) console.log(line);
      return;
    }
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
    console.log(`configuration: ${file ?? 'the embedded default'}${overrides.length ? ` with ${overrides.map(overrideWithoutSecrets).join(' ')}` : ''}; every setting is written to ${path.join(runDir(cfg), RUN_CONFIG_FILE)}`);
    for (const warning of configWarnings(cfg)) console.log(`warning: ${warning}`);
    await train(cfg, { resume: target.resume, resumeFrom: target.from, overwrite: args.overwrite, scale, stopAfter, timeLimitSeconds });
    destroyRuntime();
  },
});
