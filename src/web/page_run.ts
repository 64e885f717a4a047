// One training run in the page: the same train() as `train`, on the page's own WebGPU,
// with the bundled model, tokenizer and skill cards fetched from the page's origin,
// the shaders from the bundle, and the run directory kept in the page's storage (the
// Origin Private File System behind memory). On a software adapter the run is scaled
// down as `train` scales it. What happens is told to the page as it happens: the
// adapter, log and progress lines, each iteration's metrics (as metrics.jsonl holds
// them) and an episode of its rollout.

import shaderFiles from 'wgt:shaders';
import { configWarnings, loadConfig, runDir, type TrainConfig } from '../config/config.ts';
import { applySoftwareGpuScale, EMBEDDED_RECIPE, type ScaleRecord } from '../config/default_run.ts';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { readMetrics, type MetricsRow } from '../report/metrics.ts';
import { METRICS_FILE } from '../report/run_files.ts';
import { readTrajectoryLog } from '../rollout/trajectory_log.ts';
import type { TrajectoryRecord } from '../rollout/sample.ts';
import { browserStorage, pageProcess } from '../storage/browser_platform.ts';
import * as path from '../storage/paths.ts';
import { train } from '../trainer/train.ts';
import type { PageRecipe } from './recipe.ts';

export interface PageRunListener {
  adapter(description: string): void;
  /** A log line, or a progress line (the phase in hand). */
  line(text: string, kind: 'log' | 'progress'): void;
  /** The rows of metrics.jsonl so far, as parsed from the file. */
  metrics(rows: MetricsRow[]): void;
  /** The last episode of the newest rollout file. */
  episode(record: TrajectoryRecord, file: string): void;
}

/** The files a page fetches before a run: the server's list of what it serves beside the page. */
async function fetchShippedFiles(): Promise<void> {
  const res = await fetch('files.json');
  if (!res.ok) throw new Error(`files.json: the page's server answered ${res.status}`);
  const list = (await res.json()) as { files: string[] };
  await browserStorage.fetchFiles(list.files, location.href);
  browserStorage.provide(Object.fromEntries(Object.entries(shaderFiles).map(([name, text]) => [`shaders/${name}`, text])));
}

/** The newest rollouts/iter-N.jsonl of the run, or null. */
function newestRolloutFile(dir: string): string | null {
  const rollouts = path.join(dir, 'rollouts');
  if (!browserStorage.exists(rollouts)) return null;
  const iterations = browserStorage.list(rollouts).map((f) => /^iter-(\d+)\.jsonl$/.exec(f)).filter((m): m is RegExpExecArray => m !== null);
  if (!iterations.length) return null;
  const newest = iterations.sort((a, b) => Number(b[1]) - Number(a[1]))[0][0];
  return path.join(rollouts, newest);
}

/** The run's configuration (`cfg`, the embedded default with the page's overrides), scaled down on a software adapter. */
function pageConfig(cfg: TrainConfig, recipe: PageRecipe, software: boolean, adapter: string): { cfg: TrainConfig; scale: ScaleRecord | null; notes: string[] } {
  if (!software) return { cfg, scale: null, notes: [] };
  const scaled = applySoftwareGpuScale(cfg, recipe.overrides);
  if (!scaled.changes.length) return { cfg, scale: null, notes: [] };
  return {
    cfg: scaled.config,
    scale: { adapter, changes: scaled.changes },
    notes: [`software GPU: scaled the run down to finish in minutes (${scaled.changes.join(', ')}); set them in the address to run them as given`],
  };
}

/** Trains the recipe; resolves with the run directory when the run has ended and its files are in the page's storage. */
export async function trainInPage(recipe: PageRecipe, listener: PageRunListener): Promise<string> {
  await browserStorage.openOpfs();
  await fetchShippedFiles();
  // The configuration is checked before the GPU is touched, as `train` checks it.
  const given = loadConfig(undefined, [...EMBEDDED_RECIPE, ...recipe.overrides]);
  const rt = await initRuntime();
  listener.adapter(rt.gpu.description);
  const { cfg, scale, notes } = pageConfig(given, recipe, rt.caps.software, rt.gpu.description);
  const dir = runDir(cfg);
  if (recipe.resume) await browserStorage.loadSaved(dir);
  let shown = -1;
  const log = (line: string) => {
    listener.line(line, 'log');
    const rows = readMetrics(path.join(dir, METRICS_FILE));
    if (rows.length === shown) return;
    shown = rows.length;
    listener.metrics(rows);
    const file = newestRolloutFile(dir);
    const records = file ? readTrajectoryLog(file) : [];
    if (file && records.length) listener.episode(records[records.length - 1], file);
  };
  const offOutput = pageProcess.onOutput((text) => {
    for (const line of text.split('\n')) if (line.trim()) listener.line(line.trim(), 'progress');
  });
  try {
    for (const line of [...notes, ...configWarnings(cfg)]) log(line);
    await train(cfg, { resume: recipe.resume, overwrite: !recipe.resume, scale, log });
    listener.metrics(readMetrics(path.join(dir, METRICS_FILE)));
    await browserStorage.flush();
    return dir;
  } finally {
    offOutput();
    destroyRuntime();
  }
}
