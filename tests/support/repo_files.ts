// The repository's own files, for tests that read the tree (layers, named paths).

import { readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Files under `dir` (a path from the repository root) whose names match `ext`, as '/'-separated paths from the root. */
export function filesUnder(dir: string, ext: RegExp = /\.ts$/): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(REPO_ROOT, dir))) {
    const path = `${dir}/${name}`;
    if (statSync(join(REPO_ROOT, path)).isDirectory()) out.push(...filesUnder(path, ext));
    else if (ext.test(name)) out.push(path);
  }
  return out;
}
