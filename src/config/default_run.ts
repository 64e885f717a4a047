// The embedded default: `train` without a config file runs GRPO on the household
// environment from the bundled model, 150 iterations of 16 tasks x 8 as the reference
// recipe, with the settings a few-million-parameter model needs: lr 1e-4 with
// 1,024-sample mini-batches (the reference's 1e-6 with 256 is for 1.5B-7B models and
// moves the bundled one nowhere), episodes of up to 20 turns (the expert needs 7-14)
// of up to 64 tokens. On a software GPU the run is scaled down so a machine without a
// GPU (Mesa's llvmpipe, a few GFLOP/s) finishes in minutes. Only settings the user did
// not set on the command line change. A scaled run says so in its directory
// (SCALE_RECORD_FILE), so that whoever evaluates its checkpoints later learns why
// two-turn episodes win nothing.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import { validateConfig, type TrainConfig } from './config.ts';

/** The embedded default's settings, as overrides of the schema's defaults (the user's own overrides come after). */
export const EMBEDDED_RECIPE: readonly string[] = [
  'rollout.maxTurns=20',
  'rollout.maxResponseTokens=64',
  // A validation's 512 episodes decode as one batch, not four (the training rollout's
  // 128 are one either way; a seeded episode does not depend on its batch): on the
  // H200 a validation took 5.0-6.0 s against 7.8-11.3 s at 128 rows, with the same
  // outcome. The memory plan still cuts batches to the budget.
  'rollout.maxBatch=512',
  'optim.lr=1e-4',
  'optim.miniBatchSize=1024',
  'optim.microBatchTokens=32768',
  // 512 validation episodes put the standard error of validation success near 2
  // points; 128 cannot resolve a 5-point gain.
  'validation.tasks=128',
  'validation.runs=4',
  'validation.every=10',
];

/** The scaled-down values, by config path. */
export const SOFTWARE_GPU_SCALE: Record<string, number | boolean> = {
  iterations: 2,
  'rollout.tasksPerIteration': 1,
  'rollout.groupSize': 2,
  'rollout.maxTurns': 2,
  'rollout.maxResponseTokens': 40,
  'optim.miniBatchSize': 16,
  'validation.tasks': 1,
  'validation.runs': 1,
  'validation.every': 2,
  'validation.atStart': false,
  'checkpoint.every': 2,
};

export function applySoftwareGpuScale(cfg: TrainConfig, overrides: readonly string[]): { config: TrainConfig; changes: string[] } {
  const given = new Set(overrides.map((o) => o.slice(0, o.indexOf('='))));
  const data = structuredClone(cfg) as unknown as Record<string, Record<string, unknown> | unknown>;
  const changes: string[] = [];
  for (const [key, value] of Object.entries(SOFTWARE_GPU_SCALE)) {
    if (given.has(key)) continue;
    const parts = key.split('.');
    let obj = data as Record<string, unknown>;
    for (const p of parts.slice(0, -1)) obj = obj[p] as Record<string, unknown>;
    const leaf = parts[parts.length - 1];
    const smaller = typeof value === 'number' ? typeof obj[leaf] === 'number' && (obj[leaf] as number) > value : obj[leaf] !== value;
    if (smaller) {
      changes.push(`${key} ${obj[leaf]} -> ${value}`);
      obj[leaf] = value;
    }
  }
  return { config: changes.length ? validateConfig(data) : cfg, changes };
}

/** In a run directory: how the run was scaled down for a software GPU. */
export const SCALE_RECORD_FILE = 'software_gpu_scale.json';

export interface ScaleRecord {
  /** The adapter the run was scaled down for. */
  adapter: string;
  /** "key from -> to", as applySoftwareGpuScale reports them. */
  changes: string[];
}

/** Records the scale-down in `runDir`, or removes an older record when `record` is null (a full-size run replacing a scaled one). */
export function writeScaleRecord(runDir: string, record: ScaleRecord | null): void {
  const file = path.join(runDir, SCALE_RECORD_FILE);
  if (record === null) {
    storage().remove(file);
    return;
  }
  storage().makeDir(runDir);
  writeFileAtomic(file, JSON.stringify(record, null, 2) + '\n');
}

/** The run's scale-down record; null when it ran as configured (or the record is unreadable). */
export function readScaleRecord(runDir: string): ScaleRecord | null {
  const file = path.join(runDir, SCALE_RECORD_FILE);
  if (!storage().exists(file)) return null;
  try {
    const r = JSON.parse(storage().readText(file)) as Partial<ScaleRecord>;
    return typeof r.adapter === 'string' && Array.isArray(r.changes) && r.changes.every((c) => typeof c === 'string') ? { adapter: r.adapter, changes: r.changes } : null;
  } catch {
    return null;
  }
}
