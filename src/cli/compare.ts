import * as path from 'node:path';
import { defineCommand } from 'citty';
import { METHODS } from '../config/config_schema.ts';
import * as fs from 'node:fs';
import { configHash, loadConfig, overrideWithoutSecrets, readRunConfig, type TrainConfig } from '../config/config.ts';
import { archivedComplete, archiveRun, readSegments, recordSegment, sourceCommit } from '../compare/archive.ts';
import { comparePlan, runComparison, serverSlots, slotServerOverrides, writeComparison, type CompareRun, type RunProgress } from '../compare/compare.ts';
import { checkpointIteration, findLatestCheckpoint } from '../checkpoint/checkpoint.ts';
import { readMetrics } from '../report/metrics.ts';
import { checkRunInputs } from '../trainer/train.ts';
import { hubModelDir } from '../hub/hub_model.ts';
import { CliError, configWords, intArg, numberArg } from './args.ts';
import { gpuArgs } from './gpu_args.ts';

/** Time a run needs at least to start, validate and make an iteration; with less left of --time-limit, a run after the first waits for --resume. */
const MIN_RUN_SECONDS = 60;

/** --seeds: a count N (seeds 0..N-1), or a comma-separated list of seeds and ranges A-B (`2-2` is seed 2 alone). */
export function parseSeeds(value: string): number[] {
  if (/^\d+$/.test(value)) return Array.from({ length: intArg('--seeds', value, 1, 1000) }, (_, i) => i);
  const seeds = value.split(',').flatMap((item) => {
    const range = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(item);
    if (!range) return [intArg('--seeds', item.trim(), 0)];
    const [from, to] = [Number(range[1]), Number(range[2])];
    if (from > to) throw new CliError(`--seeds ${value}: the range ${item.trim()} runs backwards`);
    if (to - from >= 1000) throw new CliError(`--seeds ${value}: the range ${item.trim()} holds more than 1000 seeds`);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
  if (new Set(seeds).size !== seeds.length) throw new CliError(`--seeds ${value}: a seed is listed twice`);
  return seeds;
}

export const compareCommand = defineCommand({
  meta: {
    name: 'compare',
    description: 'Train several methods over several training seeds on one configuration, each method and seed a run of its own, and tabulate them, e.g. ' +
      '`compare examples/grpo_household.yaml --methods grpo,sdar,rlsd,skill_sd --seeds 3 --parallel 4`.',
  },
  args: {
    config: { type: 'positional', required: false, description: 'YAML or JSON config file, then any number of key=value overrides for every run' },
    methods: { type: 'string', required: true, description: `comma-separated methods (${METHODS.join(', ')})` },
    seeds: { type: 'string', default: '3', description: 'training seeds, each a run of every method (METHOD-sN): a count N (seeds 0..N-1), or a comma-separated list of seeds and ranges A-B (2-2: seed 2 alone)' },
    parallel: { type: 'string', default: '1', description: 'runs at once (they share the GPU)' },
    out: { type: 'string', description: 'comparison directory (default: <output.dir>/compare-<env>)' },
    resume: { type: 'boolean', description: 'run only what is missing: skip runs archived complete (--results), continue the others from their latest checkpoint, start those with none' },
    results: { type: 'string', description: 'archive each run that completes into this folder (e.g. docs/results/household), and skip runs already archived there complete' },
    overwrite: { type: 'boolean', description: 'replace existing runs of the same names' },
    'full-size': { type: 'boolean', description: 'on a software GPU, run the configuration as given instead of scaling it down' },
    'time-limit': { type: 'string', description: 'for the whole command: each run stops with a checkpoint before an iteration that would end after M minutes from the start of this command, and once less than a minute is left no further run starts (continue with --resume)' },
    'table-only': { type: 'boolean', description: 'only (re)build the table and report from the runs already in the directory' },
    ...gpuArgs,
  },
  async run({ args }) {
    const { file, overrides } = configWords('compare', args._ as string[]);
    const methods = args.methods.split(',').map((m) => m.trim()).filter(Boolean);
    if (!methods.length) throw new CliError('--methods: name at least one method');
    const seeds = parseSeeds(args.seeds);
    const parallel = intArg('--parallel', args.parallel, 1, 64);
    const limitSeconds = args['time-limit'] === undefined ? undefined : numberArg('--time-limit', args['time-limit'], 0) * 60;
    // Every run's configuration is checked before any starts, so a typo fails at once.
    let base = loadConfig(file, overrides);
    // A Hub id is downloaded once, here, and every run trains from the snapshot.
    const modelDir = await hubModelDir(base.model.path);
    if (modelDir !== base.model.path) overrides.push(`model.path=${modelDir}`);
    const runConfig = (run: CompareRun): TrainConfig => loadConfig(file, [...overrides, `method=${run.method}`, `seed=${run.seed}`]);
    for (const method of methods) {
      base = loadConfig(file, [...overrides, `method=${method}`]);
      checkRunInputs(base);
    }
    let slots: string[][] | null;
    try {
      slots = serverSlots(base, parallel);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
    const dir = args.out ?? path.join(base.output.dir, `compare-${base.env.name}`);
    const plan = comparePlan(methods, seeds);
    const results = args.results;
    if (results !== undefined && fs.existsSync(results) && !fs.statSync(results).isDirectory()) throw new CliError(`--results ${results}: not a directory`);
    let outcome: Awaited<ReturnType<typeof runComparison>> = [];
    if (!args['table-only']) {
      const flags = [
        // Every GPU option reaches each run as given (a run's speed is the GPU's business, its results the recipe's).
        ...(Object.keys(gpuArgs) as (keyof typeof gpuArgs)[]).flatMap((k) => (args[k] ? [`--${k}`, args[k] as string] : [])),
        ...(args['full-size'] ? ['--full-size'] : []),
      ];
      const argv = [process.execPath, process.argv[1]];
      // The command as archived: a key given on the command line stays out of it.
      const command = `npx bun run cli ${process.argv.slice(process.argv.indexOf('compare')).map(overrideWithoutSecrets).join(' ')}`;
      const commit = sourceCommit();
      const latestCheckpoint = (run: CompareRun) => (args.resume ? findLatestCheckpoint(path.join(dir, run.name, 'checkpoints')) : null);
      const runFlags = (run: CompareRun): string[] | null => {
        if (results !== undefined && archivedComplete(results, run.name)) {
          console.log(`skip ${run.name}: archived complete in ${results}`);
          return null;
        }
        if (!args.resume) return args.overwrite ? ['--overwrite'] : [];
        // Nothing saved to continue from: the run starts again.
        return latestCheckpoint(run) ? ['--resume'] : ['--overwrite'];
      };
      const startedAt = performance.now();
      let launched = 0;
      const atLaunch = (run: CompareRun): string[] | null => {
        let late: string[] = [];
        if (limitSeconds !== undefined) {
          // The first run always starts, so even a limit of 0 makes an iteration.
          const left = Math.max(0, limitSeconds - (performance.now() - startedAt) / 1000);
          if (launched > 0 && left < MIN_RUN_SECONDS) return null;
          late = ['--time-limit', (left / 60).toFixed(3)];
        }
        launched++;
        const latest = latestCheckpoint(run);
        recordSegment(dir, run.name, { from: latest ? checkpointIteration(latest) + 1 : 1, commit, command });
        return late;
      };
      // What a run plans is what it recorded as it started (a software GPU scales it down), else the configuration's.
      const progress = (run: CompareRun): RunProgress => ({
        done: readMetrics(path.join(dir, run.name, 'metrics.jsonl')).reduce((m, r) => Math.max(m, typeof r.iteration === 'number' ? r.iteration : 0), 0),
        planned: recordedIterations(path.join(dir, run.name)) ?? runConfig(run).iterations,
      });
      if (!args.resume && !args.overwrite) refuseHeldRuns(dir, plan.filter((run) => results === undefined || !archivedComplete(results, run.name)));
      const onExit = (run: CompareRun, code: number, ran: RunProgress | undefined) => {
        // Only a run complete as configured is archived, not one scaled down for a software GPU.
        const cfg = runConfig(run);
        if (results === undefined || code !== 0 || !ran || ran.done < cfg.iterations) return;
        const runDir = path.join(dir, run.name);
        const segments = readSegments(dir, run.name);
        archiveRun(runDir, path.join(results, run.name), {
          method: run.method, seed: run.seed, plannedIterations: cfg.iterations, commit, command, configHash: configHash(cfg), segments,
        });
        console.log(`archived ${run.name} in ${path.join(results, run.name)}`);
      };
      console.log(`compare: ${plan.length} runs (${methods.join(', ')} x seeds ${seeds.join(',')}), ${parallel} at a time, in ${dir}`);
      if (slots) console.log(`compare: each parallel run has its own servers: ${slots.map((s, i) => `slot ${i + 1} ${s.join(', ')}`).join('; ')}`);
      const slotOverrides = slots ? (slot: number) => slotServerOverrides(base, slots![slot]) : undefined;
      outcome = await runComparison(dir, plan, { argv, trainArgs: [...(file ? [file] : []), ...overrides, ...flags], runFlags, atLaunch, onExit, progress, slotOverrides }, parallel, (l) => console.log(l));
    }
    const { table, missing } = writeComparison(dir, plan);
    if (missing.length) console.log(`no metrics for: ${missing.join(', ')}`);
    console.log(table);
    console.log(`table ${path.join(dir, 'compare.md')}, data ${path.join(dir, 'compare.json')}, report ${path.join(dir, 'report.html')}`);
    // The table holds what the others made; the command still fails, each run's reason above.
    const failed = outcome.filter((r) => r.code !== 0);
    if (failed.length) throw new CliError(`${failed.length} of ${outcome.length} runs failed: ${failed.map((f) => `${f.run.name} (${f.reason ?? `exit ${f.code}`})`).join('; ')}`);
  },
});

/** The iterations a run recorded in its config.json as it started, or null before it has. */
function recordedIterations(runDir: string): number | null {
  const cfg = readRunConfig(runDir) as { iterations?: unknown } | null;
  return typeof cfg?.iterations === 'number' ? cfg.iterations : null;
}

/** Without --resume or --overwrite, a run that holds checkpoints would be refused by its own train; all such are refused here, before any starts. */
function refuseHeldRuns(dir: string, plan: readonly CompareRun[]): void {
  const held = plan.flatMap((run) => {
    const latest = findLatestCheckpoint(path.join(dir, run.name, 'checkpoints'));
    return latest ? [`${run.name} (checkpoints up to ${path.basename(latest)})`] : [];
  });
  if (held.length) {
    throw new CliError(`${dir} already holds ${held.length === 1 ? 'the run' : 'runs'} ${held.join(', ')}: pass --resume to continue ${held.length === 1 ? 'it' : 'them'}, --overwrite to replace ${held.length === 1 ? 'it' : 'them'}, or --out another directory`);
  }
}
