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
