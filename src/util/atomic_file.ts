// Writing files and directories so that a crash or an error midway never leaves a
// half-written one under the real name: write under a temporary name beside the target
// (same filesystem, so rename is atomic), sync, then rename into place.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';

export function tempPath(target: string, tag = 'tmp'): string {
  return `${target}.${tag}-${hostProcess().pid}-${Math.random().toString(36).slice(2, 10)}`;
}

/** Writes a whole file (creating its folder) under a temporary name, syncs it, and renames it into place. */
export function writeFileAtomic(file: string, contents: string | Uint8Array): void {
  storage().writeAtomic(file, contents);
}

/**
 * Builds a directory with `fill(tempDir)` and only then puts it at `target`, replacing
 * what was there. The old directory is moved aside before the new one is renamed in
 * and restored if that rename fails, so `target` is always either the old complete
 * directory or the new complete one (for an instant, neither), never a partial one.
 */
export async function replaceDirAtomic<T>(target: string, fill: (dir: string) => Promise<T> | T): Promise<T> {
  const fs = storage();
  const dir = path.resolve(target);
  fs.makeDir(path.dirname(dir));
  const temp = tempPath(dir);
  fs.makeDir(temp);
  let result: T;
  try {
    result = await fill(temp);
  } catch (e) {
    fs.remove(temp);
    throw e;
  }
  const old = fs.exists(dir) ? tempPath(dir, 'old') : null;
  if (old) fs.rename(dir, old);
  try {
    fs.rename(temp, dir);
  } catch (e) {
    if (old) fs.rename(old, dir);
    fs.remove(temp);
    throw e;
  }
  if (old) fs.remove(old);
  return result;
}
