// Writing files and directories so that a crash or an error midway never leaves a
// half-written one under the real name: write under a temporary name beside the target
// (same filesystem, so rename is atomic), sync, then rename into place.

import * as fs from 'node:fs';
import * as path from 'node:path';

export function tempPath(target: string, tag = 'tmp'): string {
  return `${target}.${tag}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

export function writeFully(fd: number, bytes: Uint8Array, position: number): void {
  let done = 0;
  while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done, position + done);
}

/** Writes a whole file (creating its folder) under a temporary name, syncs it, and renames it into place. */
export function writeFileAtomic(file: string, contents: string | Uint8Array): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const temp = tempPath(file);
  try {
    const fd = fs.openSync(temp, 'w');
    try {
      writeFully(fd, typeof contents === 'string' ? new TextEncoder().encode(contents) : contents, 0);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
  } catch (e) {
    fs.rmSync(temp, { force: true });
    throw e;
  }
}

/**
 * Builds a directory with `fill(tempDir)` and only then puts it at `target`, replacing
 * what was there. The old directory is moved aside before the new one is renamed in
 * and restored if that rename fails, so `target` is always either the old complete
 * directory or the new complete one (for an instant, neither), never a partial one.
 */
export async function replaceDirAtomic<T>(target: string, fill: (dir: string) => Promise<T> | T): Promise<T> {
  const dir = path.resolve(target);
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const temp = tempPath(dir);
  fs.mkdirSync(temp);
  let result: T;
  try {
    result = await fill(temp);
  } catch (e) {
    fs.rmSync(temp, { recursive: true, force: true });
    throw e;
  }
  const old = fs.existsSync(dir) ? tempPath(dir, 'old') : null;
  if (old) fs.renameSync(dir, old);
  try {
    fs.renameSync(temp, dir);
  } catch (e) {
    if (old) fs.renameSync(old, dir);
    fs.rmSync(temp, { recursive: true, force: true });
    throw e;
  }
  if (old) fs.rmSync(old, { recursive: true, force: true });
  return result;
}
