// The embedded default on a software GPU: the household GRPO recipe scaled down so a
// machine without a GPU (Mesa's llvmpipe, a few GFLOP/s) finishes in minutes. Only
// settings the user did not set on the command line are scaled.

import { validateConfig, type TrainConfig } from './config.ts';

/** The scaled-down values, by config path. */
export const SOFTWARE_GPU_SCALE: Record<string, number | boolean> = {
  iterations: 2,
  'rollout.tasksPerIteration': 1,
  'rollout.groupSize': 2,
  'rollout.maxTurns': 2,
  'rollout.maxResponseTokens': 40,
  'optim.miniBatchSize': 16,
  'validation.tasks': 1,
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
