// The storage, paths and process every layer reads and writes through (types.ts), from
// the platform this build runs on.

import { platform } from './platform.ts';
import type { HostProcess, Storage } from './types.ts';

export type { AppendableFile, FileStat, HostProcess, ReadableFile, Storage, TextSink, WritableFile } from './types.ts';

export function storage(): Storage {
  return platform.storage;
}

export function hostProcess(): HostProcess {
  return platform.process;
}

/** Where a file this program ships with is (`shaders/elementwise.wgsl`, `envs/household/skills/general.md`): in the nearest folder that holds it, or null. */
export function shippedFile(relative: string): string | null {
  for (const root of platform.shippedRoots) {
    const file = platform.paths.join(root, relative);
    if (platform.storage.exists(file)) return file;
  }
  return null;
}
