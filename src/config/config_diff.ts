// The settings in which two configurations differ, for a resume refused because the
// run's configuration changed: the fields themselves, not two hashes.

import type { TrainConfig } from './config_schema.ts';

/** Top-level settings a resumed run may change (configHash leaves them out). */
export const RESUMABLE_CHANGES = ['iterations', 'checkpoint', 'output', 'gpu'] as const;

function flatten(v: unknown, prefix: string, out: Map<string, unknown>): void {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else if (v !== undefined) out.set(prefix, v);
}

const show = (v: unknown) => (v === undefined ? '(unset)' : JSON.stringify(v));

/** "path: before -> after" for every setting that shapes training and differs, in path order. */
export function configDifferences(before: unknown, after: TrainConfig): string[] {
  const a = new Map<string, unknown>();
  const b = new Map<string, unknown>();
  flatten(before, '', a);
  flatten(after, '', b);
  const free = (p: string) => RESUMABLE_CHANGES.some((k) => p === k || p.startsWith(`${k}.`));
  const paths = [...new Set([...a.keys(), ...b.keys()])].filter((p) => !free(p)).sort();
  return paths.filter((p) => JSON.stringify(a.get(p)) !== JSON.stringify(b.get(p))).map((p) => `${p}: ${show(a.get(p))} -> ${show(b.get(p))}`);
}
